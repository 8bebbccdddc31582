//! `--contended`: the run with one core kept busy by another OS process.
//!
//! Before the workloads start, the suite re-runs its own binary with the hidden
//! argument `--spin CPU`: a child process that pins itself to `CPU` (the last one the
//! suite may use) and spins one thread there at 100 % until it is killed. The
//! [`Contention`] guard kills and reaps it when the run ends, and on a panic (its
//! `Drop`); should the suite itself be killed outright, the child notices that its
//! parent changed and exits by itself. Everything the suite measures then runs on a
//! host where one core is taken away by a process of equal priority, as on a machine
//! shared with a build. The spinner's own CPU time is not the suite's
//! (`getrusage(RUSAGE_SELF)` counts this process only), so the CPU columns keep their
//! meaning; the report says how much of a core the spinner actually used.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The running spinner; killed when dropped.
pub struct Contention {
    child: Child,
    cpu: usize,
    started: Instant,
}

impl Contention {
    /// Starts the spinner on the last CPU and waits until it has used some CPU time.
    pub fn start() -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| format!("--contended: {e}"))?;
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let cpu = cpus - 1;
        let child = Command::new(exe)
            .arg("--spin")
            .arg(cpu.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("--contended: cannot start the spinning process: {e}"))?;
        let contention = Self {
            child,
            cpu,
            started: Instant::now(),
        };
        // Until it spins (a fresh process takes a few milliseconds to get there).
        let deadline = Instant::now() + Duration::from_secs(5);
        while contention
            .cpu_used()
            .is_some_and(|t| t < Duration::from_millis(20))
        {
            if Instant::now() > deadline {
                return Err("--contended: the spinning process does not spin".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(contention)
    }

    /// What the report says about the contention.
    pub fn describe(&self) -> String {
        let wall = self.started.elapsed().as_secs_f64();
        let used = self.cpu_used().map_or(0.0, |t| t.as_secs_f64());
        format!(
            "**contended**: one core kept busy by another process (pid {}, one thread \
             spinning, pinned to CPU {}), which used {:.2} of a core over the {:.1} s it ran",
            self.child.id(),
            self.cpu,
            used / wall,
            wall
        )
    }

    /// The spinner's CPU time so far (`/proc/PID/stat` user + system, 10 ms ticks).
    fn cpu_used(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        // The fields after the command name (which may hold spaces), from field 3.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(Duration::from_millis(ticks * 10))
    }
}

impl Drop for Contention {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The body of `--spin CPU`: pins itself to `CPU` and spins until killed, or until
/// its parent is gone (it is then re-parented, and exits).
pub fn spin(cpu: Option<usize>) -> ! {
    if let Some(cpu) = cpu {
        pin_to(cpu);
    }
    let parent = std::os::unix::process::parent_id();
    let mut x = 0_u64;
    loop {
        for _ in 0..10_000_000 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
        if std::os::unix::process::parent_id() != parent {
            std::process::exit(0);
        }
    }
}

/// Pins the calling thread to `cpu` (best effort: the spinner spins anyway).
#[cfg(target_os = "linux")]
fn pin_to(cpu: usize) {
    /// `cpu_set_t`: 1,024 bits.
    #[repr(C)]
    struct CpuSet([u64; 16]);
    extern "C" {
        fn sched_setaffinity(pid: i32, size: usize, mask: *const CpuSet) -> i32;
    }
    if cpu >= 1024 {
        return;
    }
    let mut set = CpuSet([0; 16]);
    set.0[cpu / 64] |= 1 << (cpu % 64);
    // SAFETY: `set` is a valid `cpu_set_t` of the size passed, read only during the
    // call; pid 0 is the calling thread.
    let _ = unsafe { sched_setaffinity(0, std::mem::size_of::<CpuSet>(), &set) };
}

#[cfg(not(target_os = "linux"))]
fn pin_to(_cpu: usize) {}
