//! What the harness reads from the operating system: the CPU time of the whole
//! process and its resident memory.
//!
//! CPU time is `getrusage(RUSAGE_SELF)` user + system: every thread of the process,
//! including threads that have already exited (a runtime shut down mid-window still
//! counts), to the microsecond. The alternatives were worse: `/proc/self/stat`
//! fields 14/15 also cover all threads but tick at 10 ms (`CLK_TCK` = 100), too coarse
//! for workloads of a few milliseconds; `/proc/self/schedstat` is the main thread
//! only; summing `/proc/self/task/*/schedstat` misses threads that exited. The call is
//! declared here against the C library `std` already links, so no `libc` crate.
//!
//! Memory is `VmRSS` from `/proc/self/status`.

use std::time::Duration;

#[cfg(target_os = "linux")]
mod ffi {
    use std::ffi::{c_int, c_long};

    /// `struct timeval` (both fields are `long` on Linux).
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    pub struct Timeval {
        pub sec: c_long,
        pub usec: c_long,
    }

    /// `struct rusage`: two `timeval`s then fourteen `long` counters.
    #[repr(C)]
    #[derive(Default)]
    pub struct Rusage {
        pub utime: Timeval,
        pub stime: Timeval,
        pub rest: [c_long; 14],
    }

    pub const RUSAGE_SELF: c_int = 0;

    /// `struct rlimit` (`rlim_t` is an unsigned long on Linux).
    #[repr(C)]
    #[derive(Default)]
    pub struct Rlimit {
        pub cur: std::ffi::c_ulong,
        pub max: std::ffi::c_ulong,
    }
    pub const RLIMIT_NOFILE: c_int = 7;

    extern "C" {
        pub fn getrusage(who: c_int, usage: *mut Rusage) -> c_int;
        pub fn getrlimit(resource: c_int, limit: *mut Rlimit) -> c_int;
        pub fn setrlimit(resource: c_int, limit: *const Rlimit) -> c_int;
    }
}

/// User + system CPU time consumed so far by every thread of this process.
#[cfg(target_os = "linux")]
pub fn cpu_time() -> Duration {
    let mut usage = ffi::Rusage::default();
    // SAFETY: `usage` is a valid, writable `struct rusage` for the duration of the
    // call, which only writes into it.
    let rc = unsafe { ffi::getrusage(ffi::RUSAGE_SELF, &mut usage) };
    assert_eq!(rc, 0, "getrusage failed");
    let micros = |t: ffi::Timeval| t.sec as u64 * 1_000_000 + t.usec as u64;
    Duration::from_micros(micros(usage.utime) + micros(usage.stime))
}

/// Not measured off Linux: reported as zero.
#[cfg(not(target_os = "linux"))]
pub fn cpu_time() -> Duration {
    Duration::ZERO
}

/// Raises this process's soft limit on open files to at least `wanted` if the hard
/// limit allows (to the hard limit otherwise); returns the soft limit now in force.
#[cfg(target_os = "linux")]
pub fn raise_fd_limit(wanted: u64) -> u64 {
    let mut limit = ffi::Rlimit::default();
    // SAFETY: `limit` is a valid, writable `struct rlimit` for the call, which only
    // writes into it.
    if unsafe { ffi::getrlimit(ffi::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 0;
    }
    if limit.cur >= wanted {
        return limit.cur;
    }
    let raised = ffi::Rlimit {
        cur: wanted.min(limit.max),
        max: limit.max,
    };
    // SAFETY: `raised` is a valid `struct rlimit` the call only reads.
    if unsafe { ffi::setrlimit(ffi::RLIMIT_NOFILE, &raised) } == 0 {
        raised.cur
    } else {
        limit.cur
    }
}

/// Left as it is off Linux: reported as `wanted`.
#[cfg(not(target_os = "linux"))]
pub fn raise_fd_limit(wanted: u64) -> u64 {
    wanted
}

/// The process's resident set size in bytes (`VmRSS`), or 0 where `/proc` is missing.
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// The CPU model (`/proc/cpuinfo`) and the number of CPUs this process may use.
pub fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    format!("{cpus} CPUs, {model}")
}

/// The 1-, 5- and 15-minute load averages (`/proc/loadavg`): how busy the shared
/// machine was.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
