//! The standard `process_*` metrics of a Prometheus target (CPU time, memory, file
//! descriptors, start time), read from Linux's `/proc/self` at scrape time.
//!
//! Owns reading and parsing those files; elsewhere (no `/proc`) [`read`] gives `None` and
//! the series are left out. Hand-written rather than the `procfs` crate: five numbers from
//! three files are some forty lines, where the crate would add a dozen crates to the build.

use std::path::Path;

/// The figures of this process at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessStats {
    /// User and system CPU time, in seconds.
    pub cpu_seconds: f64,
    pub resident_memory_bytes: u64,
    pub virtual_memory_bytes: u64,
    /// `None` when `/proc/self/fd` cannot be listed.
    pub open_fds: Option<u64>,
    /// The soft limit on open files; `None` when unlimited or unknown.
    pub max_fds: Option<u64>,
    /// When the process started, in seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

/// This process's figures, or `None` where `/proc` is not there to read.
pub fn read() -> Option<ProcessStats> {
    let proc = Path::new("/proc");
    let stat = std::fs::read_to_string(proc.join("self/stat")).ok()?;
    let boot_time = boot_time_seconds(&std::fs::read_to_string(proc.join("stat")).ok()?)?;
    let fields = Stat::parse(&stat)?;
    let ticks = clock_ticks_per_second()?;
    let open_fds = std::fs::read_dir(proc.join("self/fd"))
        .ok()
        // The listing's own descriptor is among the entries; it is closed again right after.
        .map(|entries| entries.count().saturating_sub(1) as u64);
    let max_fds = std::fs::read_to_string(proc.join("self/limits"))
        .ok()
        .and_then(|limits| max_open_files(&limits));
    Some(ProcessStats {
        cpu_seconds: (fields.utime + fields.stime) as f64 / ticks,
        resident_memory_bytes: fields.rss_pages.saturating_mul(page_size()?),
        virtual_memory_bytes: fields.vsize,
        open_fds,
        max_fds,
        start_time_seconds: boot_time as f64 + fields.starttime as f64 / ticks,
    })
}

/// The fields of `/proc/self/stat` used here (proc(5) numbers them from 1).
#[derive(Debug, PartialEq)]
struct Stat {
    utime: u64,
    stime: u64,
    starttime: u64,
    vsize: u64,
    rss_pages: u64,
}

impl Stat {
    fn parse(text: &str) -> Option<Stat> {
        // Field 2 is the command name in parentheses and may itself hold spaces and
        // parentheses; the fields after the last `)` start with field 3.
        let rest = &text[text.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |number: usize| -> Option<u64> { fields.get(number - 3)?.parse().ok() };
        Some(Stat {
            utime: field(14)?,
            stime: field(15)?,
            starttime: field(22)?,
            vsize: field(23)?,
            rss_pages: field(24)?,
        })
    }
}

/// The `btime` line of `/proc/stat`: when the system booted, in seconds since the epoch.
fn boot_time_seconds(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

/// The soft limit of the `Max open files` line of `/proc/self/limits`.
fn max_open_files(text: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(unix)]
fn clock_ticks_per_second() -> Option<f64> {
    // SAFETY: sysconf only reads a system setting; it has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then_some(ticks as f64)
}

#[cfg(unix)]
fn page_size() -> Option<u64> {
    // SAFETY: as above.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&size| size > 0)
}

#[cfg(not(unix))]
fn clock_ticks_per_second() -> Option<f64> {
    None
}

#[cfg(not(unix))]
fn page_size() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_a_command_name_holding_spaces_and_parentheses() {
        let text = "4242 (lead relay (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 \
                    250 50 0 0 20 0 9 0 123456 987654321 2048 18446744073709551615 1 1 0 0 0";
        assert_eq!(
            Stat::parse(text),
            Some(Stat {
                utime: 250,
                stime: 50,
                starttime: 123456,
                vsize: 987654321,
                rss_pages: 2048,
            })
        );
        assert_eq!(Stat::parse("garbage"), None);
    }

    #[test]
    fn parses_boot_time_and_the_open_files_limit() {
        assert_eq!(
            boot_time_seconds("cpu  1 2 3\nbtime 1700000000\nprocesses 5\n"),
            Some(1_700_000_000)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max cpu time              unlimited            unlimited            seconds\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
        assert_eq!(
            max_open_files(
                "Max open files            unlimited            unlimited            files\n"
            ),
            None
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_process() {
        let stats = read().expect("linux has /proc");
        assert!(stats.resident_memory_bytes > 0);
        assert!(stats.virtual_memory_bytes >= stats.resident_memory_bytes);
        assert!(stats.open_fds.is_some_and(|fds| fds >= 3));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("the clock is after 1970")
            .as_secs_f64();
        assert!(stats.start_time_seconds <= now + 1.0);
        assert!(stats.start_time_seconds > now - 24.0 * 3600.0 * 365.0);
    }
}
