//! A run's columns of whole numbers: its differentials D (whole TSC ticks) and its hardware-clock
//! differentials R (whole ns), one per probe, in 32 bits each.

/// A column of whole numbers of a unit, one per probe or none: each in 32 bits (half the memory
/// of a float, and counted as it is), those that do not fit kept aside with their place; made
/// floats (times the unit) where read. A run's differentials D (whole TSC ticks) and its
/// hardware-clock differentials R (whole ns).
#[derive(Default)]
pub(crate) struct Column {
    narrow: Vec<i32>,
    /// (place, value) of each value that does not fit in `narrow`, in place order.
    wide: Vec<(usize, i64)>,
    /// What one is, ns.
    unit: f64,
}

impl Column {
    /// A probe without a value.
    pub(crate) const NONE: i32 = i32::MIN;
    /// A value kept in `wide`.
    const WIDE: i32 = i32::MAX;

    /// The values `column` gives (about `len`), each a whole number of `unit`.
    #[cfg(test)]
    pub(crate) fn of(column: impl Iterator<Item = Option<i64>>, len: usize, unit: f64) -> Column {
        let mut c = Column::with_capacity(len, unit);
        column.for_each(|v| c.push(v));
        c
    }

    /// An empty column of whole numbers of `unit`, room made for `len`.
    pub(crate) fn with_capacity(len: usize, unit: f64) -> Column {
        Column { narrow: Vec::with_capacity(len), wide: Vec::new(), unit }
    }

    /// Add `values` at the next places.
    pub(crate) fn extend(&mut self, values: &[i64]) {
        if values.iter().all(|&v| v > i64::from(Column::NONE) && v < i64::from(Column::WIDE)) {
            self.narrow.extend(values.iter().map(|&v| v as i32));
        } else {
            values.iter().for_each(|&v| self.push(Some(v)));
        }
    }

    /// Add `v` at the next place.
    #[inline]
    pub(crate) fn push(&mut self, v: Option<i64>) {
        let narrow = match v.map(i32::try_from) {
            None => Column::NONE,
            Some(Ok(v)) if v != Column::NONE && v != Column::WIDE => v,
            Some(_) => {
                self.wide.extend(v.map(|v| (self.narrow.len(), v)));
                Column::WIDE
            }
        };
        self.narrow.push(narrow);
    }

    /// Places.
    pub(crate) fn len(&self) -> usize {
        self.narrow.len()
    }

    /// What one is, ns.
    pub(crate) fn unit(&self) -> f64 {
        self.unit
    }

    /// Every value, `NONE` where a probe has none, when all fit in 32 bits.
    pub(crate) fn narrow(&self) -> Option<&[i32]> {
        self.wide.is_empty().then_some(self.narrow.as_slice())
    }

    /// Whether place `k` holds a value.
    pub(crate) fn has(&self, k: usize) -> bool {
        self.narrow[k] != Column::NONE
    }

    /// The value at place `k` times the unit (NaN where there is none).
    pub(crate) fn at(&self, k: usize) -> f64 {
        match self.narrow[k] {
            Column::NONE => f64::NAN,
            Column::WIDE => {
                let at = self.wide.partition_point(|w| w.0 < k);
                self.wide.get(at).map_or(f64::NAN, |w| w.1 as f64 * self.unit)
            }
            v => f64::from(v) * self.unit,
        }
    }

    /// Every value times the unit, in place order (NaN where there is none).
    pub(crate) fn iter(&self) -> impl Iterator<Item = f64> + '_ {
        (0..self.len()).map(|k| self.at(k))
    }
}
