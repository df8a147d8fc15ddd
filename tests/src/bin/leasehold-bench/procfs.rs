//! Figures of a process and of the machine, read from /proc.

use std::collections::BTreeMap;
use std::path::Path;

pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// utime + stime in clock ticks of `/proc/<pid>/task/<tid>/stat` or `/proc/<pid>/stat`.
pub fn stat_ticks(path: &Path) -> Option<(String, u64)> {
    let s = std::fs::read_to_string(path).ok()?;
    let open = s.find('(')?;
    let close = s.rfind(')')?;
    let comm = s[open + 1..close].to_string();
    let fields: Vec<&str> = s[close + 2..].split_whitespace().collect();
    // After "(comm) ": state is field 3, utime field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((comm, utime + stime))
}

/// CPU ticks per thread name (threads of the same name added up).
pub fn thread_ticks(pid: u32) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for entry in dir.flatten() {
        if let Some((comm, ticks)) = stat_ticks(&entry.path().join("stat")) {
            *out.entry(comm).or_insert(0) += ticks;
        }
    }
    out
}

/// utime + stime in clock ticks of a process and its direct children (a
/// PostgreSQL postmaster and its backends); children that exited meanwhile
/// are not counted.
pub fn tree_ticks(pid: u32) -> u64 {
    let mut total = stat_ticks(Path::new(&format!("/proc/{pid}/stat")))
        .map(|(_, t)| t)
        .unwrap_or(0);
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return total;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(s) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(close) = s.rfind(')') else { continue };
        let fields: Vec<&str> = s[close + 2..].split_whitespace().collect();
        // After "(comm) ": state, ppid, …, utime (12th), stime (13th).
        if fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid) {
            let t = |i: usize| {
                fields
                    .get(i)
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            total += t(11) + t(12);
        }
    }
    total
}

/// (busy, steal) ticks of all CPUs: busy = everything but idle and iowait.
pub fn machine_ticks() -> (u64, u64) {
    let Ok(s) = std::fs::read_to_string("/proc/stat") else {
        return (0, 0);
    };
    let Some(line) = s.lines().find(|l| l.starts_with("cpu ")) else {
        return (0, 0);
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal guest guest_nice
    let busy = v.iter().take(8).sum::<u64>() - v.get(3).unwrap_or(&0) - v.get(4).unwrap_or(&0);
    (busy, *v.get(7).unwrap_or(&0))
}
