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

    extern "C" {
        pub fn getrusage(who: c_int, usage: *mut Rusage) -> c_int;
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
