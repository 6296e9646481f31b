//! Tests of the recorder with fake ports: run boundaries under stalled pollers and drivers,
//! counters, errors.

use super::*;

use arrow_ipc::reader::StreamReader;

/// When a fake port stops, as a descheduled poller or a driver waiting in its receive call
/// would, until told to go on.
enum Stall {
    /// In the first poll, before taking a burst (it says so first).
    BeforeFrames,
    /// Right after the first burst was handed over.
    AfterFrames,
}

/// A port fed through a channel, a burst of frames per message; it says when it has handed a
/// burst over.
struct FakePort {
    bursts: Receiver<Vec<Vec<u8>>>,
    polled: Sender<()>,
    stall: Option<(Stall, Receiver<()>)>,
    /// Frames its "NIC" dropped and nobody read yet.
    drops: Arc<AtomicU64>,
    /// The k-th frame of a burst (from 0) is stamped `(k + 1) * ticks_per_frame`.
    ticks_per_frame: u64,
}

impl FakePort {
    fn stall_if(&mut self, when: fn(&Stall) -> bool) {
        if let Some((_, resume)) = self.stall.take_if(|(s, _)| when(s)) {
            let _ = self.polled.send(());
            resume.recv().expect("test alive");
        }
    }
}

impl RxPort for FakePort {
    fn poll(&mut self, budget: usize, f: &mut dyn FnMut(&[u8], u64)) -> usize {
        self.stall_if(|s| matches!(s, Stall::BeforeFrames));
        let Ok(burst) = self.bursts.try_recv() else { return 0 };
        assert!(burst.len() <= budget, "bursts fit a poll");
        for (tsc, frame) in burst.iter().enumerate() {
            f(frame, (tsc as u64 + 1) * self.ticks_per_frame);
        }
        let _ = self.polled.send(());
        self.stall_if(|s| matches!(s, Stall::AfterFrames));
        burst.len()
    }

    fn name(&self) -> String {
        "fake".into()
    }

    fn drops(&mut self) -> u64 {
        self.drops.swap(0, Ordering::SeqCst)
    }
}

/// Where a test sends a fake port its bursts of frames.
type Feed = Sender<Vec<Vec<u8>>>;

/// A fake port, its feed, and the channel saying it handed a burst over (or stalled).
fn port(stall: Option<(Stall, Receiver<()>)>) -> (Box<dyn RxPort>, Feed, Receiver<()>) {
    let (feed, bursts) = mpsc::channel();
    let (polled, polled_rx) = mpsc::channel();
    (Box::new(FakePort { bursts, polled, stall, drops: Arc::default(), ticks_per_frame: 1 }), feed, polled_rx)
}

fn probes(ids: std::ops::RangeInclusive<u64>) -> Vec<Vec<u8>> {
    ids.map(|id| probe::payload(id, ProbeFormat::Latencylab, 64)).collect()
}

fn feed(to: &Feed, polled: &Receiver<()>, ids: std::ops::RangeInclusive<u64>) {
    to.send(probes(ids)).expect("port alive");
    polled.recv_timeout(Duration::from_secs(10)).expect("the port is polled");
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agent-recorder-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn options(out: &Path, cores: Vec<usize>) -> Options {
    Options {
        format: ProbeFormat::Latencylab,
        cores,
        out: out.to_path_buf(),
        queue: 64,
        service_core: None,
        soak: None,
        sleep_unpinned: false,
        tsc_hz: 1e9,
    }
}

/// Wait until `n` probes were counted as outside a run.
fn outside_reaches(rec: &Recorder, n: u64) {
    let start = Instant::now();
    while rec.shared.totals().outside < n {
        assert!(start.elapsed() < Duration::from_secs(10), "{n} probes outside a run");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Stop the recorder, which has no error left to report, and remove its folder.
fn stop_clean(rec: Recorder, out: &Path) {
    assert_eq!(rec.errors(), Vec::<String>::new());
    rec.stop();
    std::fs::remove_dir_all(out).expect("cleanup");
}

fn rows(file: &Path) -> usize {
    let reader = StreamReader::try_new(File::open(file).expect("run file"), None).expect("a stream");
    reader.map(|b| b.expect("a batch").num_rows()).sum()
}

#[test]
fn a_descheduled_pollers_records_from_before_end_are_in_the_run() {
    let out = scratch("stall");
    let (resume, stall) = mpsc::channel();
    let (slow, slow_feed, slow_polled) = port(Some((Stall::AfterFrames, stall)));
    let (idle, _idle_feed, _) = port(None);
    let mut rec = Recorder::start(vec![slow, idle], options(&out, vec![])).expect("start");
    let file = rec.begin(1).expect("begin");
    // The poller dequeued 10 probes, has not handed them over, and is not running.
    feed(&slow_feed, &slow_polled, 1..=10);
    let counters = std::thread::scope(|sc| {
        let end = sc.spawn(|| rec.end(1));
        std::thread::sleep(Duration::from_millis(100));
        assert!(!end.is_finished(), "the run is not closed while a poller holds records of it");
        resume.send(()).expect("port alive");
        end.join().expect("no panic").expect("end")
    });
    assert_eq!(
        counters,
        RunCounters { run: 1, records: 10, pipeline_only: 10, file: file.clone(), ..RunCounters::default() }
    );
    assert_eq!(rows(&file), 10);
    stop_clean(rec, &out);
}

#[test]
fn a_poll_waiting_in_its_driver_across_begin_counts_into_the_run() {
    let out = scratch("driver-wait");
    let (resume, stall) = mpsc::channel();
    let (waiting, feed, in_driver) = port(Some((Stall::BeforeFrames, stall)));
    let mut rec = Recorder::start(vec![waiting], options(&out, vec![])).expect("start");
    in_driver.recv_timeout(Duration::from_secs(10)).expect("the first poll waits");
    feed.send(probes(1..=7)).expect("port alive");
    let start = Instant::now();
    let file = rec.begin(1).expect("begin");
    assert!(start.elapsed() < ACK_TIMEOUT / 2, "begin does not wait for a poll in its driver");
    resume.send(()).expect("port alive");
    let c = rec.end(1).expect("end");
    assert_eq!((c.records, c.pipeline_only, c.outside_run), (7, 7, 0), "{c:?}");
    assert_eq!(rows(&file), 7);
    stop_clean(rec, &out);
}

#[test]
fn runs_hold_what_was_dequeued_while_open_and_the_rest_counts_as_outside() {
    let out = scratch("outside");
    let (a, a_feed, a_polled) = port(None);
    let (b, b_feed, b_polled) = port(None);
    let mut rec = Recorder::start(vec![a, b], options(&out, vec![])).expect("start");
    feed(&a_feed, &a_polled, 100..=101);
    // Once counted as outside, these cannot count into the run (a poll overlapping `begin` would).
    outside_reaches(&rec, 2);
    let first = rec.begin(1).expect("begin");
    feed(&a_feed, &a_polled, 1..=5);
    feed(&b_feed, &b_polled, 1..=4);
    // No wait for the writer: `end` waits for the pollers.
    let c = rec.end(1).expect("end");
    assert_eq!((c.records, c.matched, c.pipeline_only, c.bypass_only), (9, 4, 1, 0));
    assert_eq!(c.outside_run, 2, "the probes before `begin 1`");
    feed(&a_feed, &a_polled, 6..=8);
    outside_reaches(&rec, 5);
    let second = rec.begin(2).expect("begin");
    let c = rec.end(2).expect("end");
    assert_eq!((c.records, c.outside_run), (0, 3), "the probes between the runs");
    assert_eq!((rows(&first), rows(&second)), (9, 0));
    assert!(rec.end(2).is_err() && rec.begin(0).is_err());
    stop_clean(rec, &out);
}

#[test]
fn tagged_probes_are_reflections_looping_back_and_are_counted_not_recorded() {
    let out = scratch("loops");
    let (a, a_feed, a_polled) = port(None);
    let (b, b_feed, b_polled) = port(None);
    let mut rec = Recorder::start(vec![a, b], options(&out, vec![])).expect("start");
    let file = rec.begin(1).expect("begin");
    feed(&a_feed, &a_polled, 1..=3);
    feed(&b_feed, &b_polled, 1..=3);
    // The agent's own reflections of probes 1 to 3 (tagged P and B) come back on both ports.
    let mut looped = probes(1..=3);
    for (k, f) in looped.iter_mut().enumerate() {
        let tag = if k % 2 == 0 { probe::TAG_PIPELINE } else { probe::TAG_BYPASS };
        assert!(probe::set_tag(f, ProbeFormat::Latencylab, tag));
    }
    a_feed.send(looped.clone()).expect("port alive");
    a_polled.recv_timeout(Duration::from_secs(10)).expect("polled");
    b_feed.send(looped).expect("port alive");
    b_polled.recv_timeout(Duration::from_secs(10)).expect("polled");
    let c = rec.end(1).expect("end");
    assert_eq!((c.records, c.matched, c.non_probe, c.reflected_loops), (6, 3, 0, 6), "{c:?}");
    assert_eq!(rows(&file), 6);
    // Per run: the next run starts from zero.
    rec.begin(2).expect("begin");
    assert_eq!(rec.end(2).expect("end").reflected_loops, 0);
    stop_clean(rec, &out);
}

#[test]
fn the_writer_is_pinned_to_the_service_core() {
    let out = scratch("service");
    let (p, _feed, _) = port(None);
    let rec =
        Recorder::start(vec![p], Options { service_core: Some(1 << 20), ..options(&out, vec![]) }).expect("start");
    let start = Instant::now();
    let mut errors = rec.errors();
    while errors.is_empty() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
        errors = rec.errors();
    }
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("writer: cannot pin to core 1048576"), "{errors:?}");
    stop_clean(rec, &out);
}

#[test]
fn each_error_is_reported_once() {
    let out = scratch("errors");
    let (p, _feed, _) = port(None);
    let rec = Recorder::start(vec![p], options(&out, vec![1 << 20])).expect("start");
    let start = Instant::now();
    let mut errors = rec.errors();
    while errors.is_empty() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
        errors = rec.errors();
    }
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("fake: cannot pin to core 1048576"), "{errors:?}");
    assert!(rec.errors().is_empty(), "an error is not reported again");
    stop_clean(rec, &out);
}

#[test]
fn nic_drops_count_into_the_run_open_while_they_happened() {
    let out = scratch("nic-drops");
    let drops = Arc::new(AtomicU64::new(5));
    let (_feed, bursts) = mpsc::channel();
    let (polled, _polled_rx) = mpsc::channel();
    let port = Box::new(FakePort { bursts, polled, stall: None, drops: drops.clone(), ticks_per_frame: 1 });
    let mut rec = Recorder::start(vec![port], options(&out, vec![])).expect("start");
    // 5 frames dropped before the run: read when the poller sees the run begin, outside it.
    rec.begin(1).expect("begin");
    let start = Instant::now();
    while rec.shared.nic_drops_outside.load(Ordering::SeqCst) < 5 {
        assert!(start.elapsed() < Duration::from_secs(10), "the drops before the run are read at its begin");
        std::thread::sleep(Duration::from_millis(1));
    }
    // 3 dropped while it is open: read at its end, in its counters.
    drops.fetch_add(3, Ordering::SeqCst);
    assert_eq!(rec.end(1).expect("end").nic_drops, 3);
    // None in the next run.
    rec.begin(2).expect("begin");
    assert_eq!(rec.end(2).expect("end").nic_drops, 0);
    stop_clean(rec, &out);
}

/// Soak mode: the differentials of each matched pair go into the run's interval log, appended
/// while the run is open, with no records kept; unpaired copies are counted. Pipeline copies are
/// stamped 3 (k + 1) and bypass copies k + 1 ticks for the k-th frame of a burst, at 1 GHz: the
/// differentials of a 128-probe burst (bursts that add up to a poller's batch) are 2, 4, ..., 256 ns.
#[test]
fn soak_mode_keeps_a_histogram_of_the_differentials_appended_every_interval() {
    let out = scratch("soak");
    let (pipeline_feed, pipeline_polled) = mpsc::channel();
    let (polled, pipeline_polled_rx) = mpsc::channel();
    let pipeline = FakePort { bursts: pipeline_polled, polled, stall: None, drops: Arc::default(), ticks_per_frame: 3 };
    let (bypass, bypass_feed, bypass_polled) = port(None);
    let soak = SoakOptions { interval: Duration::from_millis(100), records: false, tsc_hz: 1e9 };
    let opts = Options { soak: Some(soak), ..options(&out, vec![]) };
    let mut rec = Recorder::start(vec![Box::new(pipeline), bypass], opts).expect("start");
    let file = rec.begin(1).expect("begin");
    for burst in 0..8u64 {
        let ids = burst * 128 + 1..=burst * 128 + 128;
        feed(&pipeline_feed, &pipeline_polled_rx, ids.clone());
        feed(&bypass_feed, &bypass_polled, ids);
        if burst == 3 {
            // Past the interval: the first four bursts are appended on their own.
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    // Ten probes whose pipeline copy was lost.
    feed(&bypass_feed, &bypass_polled, 1025..=1034);
    let c = rec.end(1).expect("end");
    let log = c.histogram.clone().expect("a histogram log");
    assert_eq!(log, out.join("run=1.hlog"));
    assert_eq!((c.matched, c.pipeline_only, c.bypass_only, c.records), (1024, 0, 10, 0), "{c:?}");
    assert_eq!(rows(&file), 0, "no records in soak mode without them");

    let intervals = latency_proto::soak::read_log(&std::fs::read(&log).expect("the log")).expect("a log");
    assert!(intervals.len() >= 2, "appended while the run was open: {}", intervals.len());
    assert_eq!(intervals[0].differentials.len(), 512, "the first interval holds the first four bursts");
    let mut all = latency_proto::soak::Differentials::default();
    intervals.iter().for_each(|i| all.add(&i.differentials));
    assert_eq!(all.len(), 1024);
    // Eight bursts of 2, 4, ..., 256 ns: the median is the 512th of 1,024 values (128 ns), p99
    // the 1,014th (254 ns), the minimum 2 ns.
    for (q, exact) in [(0.5, 128.0), (0.99, 254.0), (0.0001, 2.0)] {
        let got = all.quantile(q).expect("values");
        assert!((got - exact).abs() <= latency_proto::soak::RESOLUTION * exact + 0.5, "q {q}: {got} vs {exact}");
    }
    stop_clean(rec, &out);
}
