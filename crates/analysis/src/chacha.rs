//! The words of a `ChaCha8Rng` (rand_chacha's stream, word for word), sixteen blocks at a time
//! in AVX-512 registers where the processor has them: each of the sixteen state words of
//! sixteen blocks in one register, eight rounds (Bernstein's ChaCha: a 64-bit block counter in
//! words 12–13, the 64-bit stream in words 14–15). Elsewhere rand_chacha's own code makes them.
//! The resamples' weights draw most of the analysis' random words.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Words of a generator's stream from its place when made.
pub(crate) enum Words {
    /// Sixteen blocks at a time.
    Wide(Box<Wide>),
    /// rand_chacha's.
    Plain(Box<ChaCha8Rng>),
}

/// The state of [`Words::Wide`].
pub(crate) struct Wide {
    #[cfg(target_arch = "x86_64")]
    simd: pulp::x86::V4,
    key: [u32; 8],
    stream: [u32; 2],
    /// The first block after `made`.
    block: u64,
    made: [u32; 256],
    /// Words of `made` already given.
    given: usize,
}

/// "expand 32-byte k".
const CONSTANTS: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

impl Words {
    /// The words `rng` would give next.
    pub(crate) fn of(rng: &ChaCha8Rng) -> Words {
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = pulp::x86::V4::try_new() {
            let seed = rng.get_seed();
            let key = std::array::from_fn(|k| u32::from_le_bytes([0, 1, 2, 3].map(|b| seed[4 * k + b])));
            let stream = rng.get_stream();
            let at = rng.get_word_pos();
            let mut wide = Wide {
                simd,
                key,
                stream: [stream as u32, (stream >> 32) as u32],
                block: (at >> 4) as u64,
                made: [0; 256],
                given: 0,
            };
            wide.refill();
            wide.given = (at & 15) as usize;
            return Words::Wide(Box::new(wide));
        }
        Words::Plain(Box::new(rng.clone()))
    }

    /// Fill `out` with the next words.
    pub(crate) fn fill(&mut self, mut out: &mut [u32]) {
        match self {
            Words::Plain(rng) => rng.fill(out),
            Words::Wide(wide) => {
                while !out.is_empty() {
                    if wide.given == wide.made.len() {
                        wide.refill();
                    }
                    let n = out.len().min(wide.made.len() - wide.given);
                    out[..n].copy_from_slice(&wide.made[wide.given..wide.given + n]);
                    wide.given += n;
                    out = &mut out[n..];
                }
            }
        }
    }

    /// The next word.
    pub(crate) fn next(&mut self) -> u32 {
        let mut one = [0];
        self.fill(&mut one);
        one[0]
    }
}

impl Wide {
    /// The sixteen blocks from `block` into `made`.
    #[cfg(target_arch = "x86_64")]
    fn refill(&mut self) {
        let (simd, key, stream, block) = (self.simd, self.key, self.stream, self.block);
        let made = &mut self.made;
        simd.vectorize(
            #[inline(always)]
            || {
                use std::arch::x86_64::__m512i;
                let a = simd.avx512f;
                let splat = |w: u32| a._mm512_set1_epi32(w as i32);
                // Block counters: the low words of sixteen blocks on, and the high word one more
                // where the low one wrapped.
                let low = a._mm512_add_epi32(
                    splat(block as u32),
                    a._mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                );
                let wrapped = a._mm512_cmplt_epu32_mask(low, splat(block as u32));
                let high = a._mm512_mask_add_epi32(
                    splat((block >> 32) as u32),
                    wrapped,
                    splat((block >> 32) as u32),
                    splat(1),
                );
                let input: [__m512i; 16] = std::array::from_fn(|w| match w {
                    0..4 => splat(CONSTANTS[w]),
                    4..12 => splat(key[w - 4]),
                    12 => low,
                    13 => high,
                    _ => splat(stream[w - 14]),
                });
                let mut x = input;
                for _ in 0..4 {
                    for q in [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]] {
                        quarter(a, &mut x, q);
                    }
                    for q in [[0, 5, 10, 15], [1, 6, 11, 12], [2, 7, 8, 13], [3, 4, 9, 14]] {
                        quarter(a, &mut x, q);
                    }
                }
                // Word w of block b is lane b of register w.
                let words: [[u32; 16]; 16] =
                    std::array::from_fn(|w| pulp::bytemuck::cast(a._mm512_add_epi32(x[w], input[w])));
                for (b, out) in made.as_chunks_mut::<16>().0.iter_mut().enumerate() {
                    *out = std::array::from_fn(|w| words[w][b]);
                }
            },
        );
        self.block = block.wrapping_add(16);
        self.given = 0;
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn refill(&mut self) {}
}

/// ChaCha's quarter round on words `i j k l` of sixteen blocks (inlined where AVX-512 is on).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn quarter(a: pulp::core_arch::x86::Avx512f, x: &mut [std::arch::x86_64::__m512i; 16], [i, j, k, l]: [usize; 4]) {
    x[i] = a._mm512_add_epi32(x[i], x[j]);
    x[l] = a._mm512_rol_epi32::<16>(a._mm512_xor_si512(x[l], x[i]));
    x[k] = a._mm512_add_epi32(x[k], x[l]);
    x[j] = a._mm512_rol_epi32::<12>(a._mm512_xor_si512(x[j], x[k]));
    x[i] = a._mm512_add_epi32(x[i], x[j]);
    x[l] = a._mm512_rol_epi32::<8>(a._mm512_xor_si512(x[l], x[i]));
    x[k] = a._mm512_add_epi32(x[k], x[l]);
    x[j] = a._mm512_rol_epi32::<7>(a._mm512_xor_si512(x[j], x[k]));
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngCore, SeedableRng};

    #[test]
    fn the_words_are_rand_chachas_word_for_word() {
        // From seeds, streams and places of every kind (a place within a block, a block counter
        // whose low word wraps among the sixteen), in pieces of every length.
        for (seed, stream, at) in [
            (1u64, 0u64, 0u128),
            (7, 3, 5),
            (42, u64::MAX, 1_000_003),
            (9, 1 << 40, (u128::from(u32::MAX) - 3) << 4 | 9),
            (3, 5, u128::from(u64::MAX) << 4),
        ] {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(stream);
            rng.set_word_pos(at);
            let mut words = Words::of(&rng);
            for len in [1, 15, 16, 17, 255, 256, 257, 1000] {
                let mut got = vec![0u32; len];
                words.fill(&mut got);
                let want: Vec<u32> = (0..len).map(|_| rng.next_u32()).collect();
                assert_eq!(got, want, "seed {seed}, stream {stream}, at {at}, {len} words");
            }
            assert_eq!(words.next(), rng.next_u32());
        }
        #[cfg(target_arch = "x86_64")]
        if pulp::x86::V4::try_new().is_some() {
            assert!(matches!(Words::of(&ChaCha8Rng::seed_from_u64(1)), Words::Wide(_)));
        }
    }
}
