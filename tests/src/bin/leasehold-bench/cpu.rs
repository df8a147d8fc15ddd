//! CPU use over a measured window, in cores: the server per thread, the
//! generator, and the whole machine (to tell a contended window).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use crate::procfs::{machine_ticks, stat_ticks, thread_ticks, tree_ticks};
use crate::report::round3;

/// Clock ticks per second of /proc (USER_HZ; 100 on every Linux we run on).
pub const TICKS_PER_S: f64 = 100.0;

pub struct CpuSnapshot {
    at: Instant,
    server: BTreeMap<String, u64>,
    bench: u64,
    /// The database server and its backends, when its pid is known.
    db: Option<u64>,
    /// Machine-wide (busy, steal) ticks from /proc/stat.
    machine: (u64, u64),
}

/// CPU use over a window, in cores.
pub struct CpuUse {
    pub server_threads: BTreeMap<String, f64>,
    pub server: f64,
    pub bench: f64,
    pub db: Option<f64>,
    pub machine_busy: f64,
    pub machine_steal: f64,
}

impl CpuSnapshot {
    /// `pids`: the servers (threads of the same name added up over them).
    pub fn take(pids: &[u32], db_pid: Option<u32>) -> CpuSnapshot {
        let mut server = BTreeMap::new();
        for &pid in pids {
            for (name, t) in thread_ticks(pid) {
                *server.entry(name).or_insert(0) += t;
            }
        }
        CpuSnapshot {
            at: Instant::now(),
            server,
            db: db_pid.map(tree_ticks),
            bench: stat_ticks(Path::new("/proc/self/stat"))
                .map(|(_, t)| t)
                .unwrap_or(0),
            machine: machine_ticks(),
        }
    }

    pub fn since(&self, before: &CpuSnapshot) -> CpuUse {
        let secs = self.at.duration_since(before.at).as_secs_f64().max(1e-9);
        let cores = |ticks: u64| round3(ticks as f64 / TICKS_PER_S / secs);
        let mut by_thread = BTreeMap::new();
        let mut total = 0;
        for (name, t) in &self.server {
            let d = t.saturating_sub(*before.server.get(name).unwrap_or(&0));
            total += d;
            if d > 0 {
                by_thread.insert(name.clone(), cores(d));
            }
        }
        CpuUse {
            server_threads: by_thread,
            server: cores(total),
            bench: cores(self.bench.saturating_sub(before.bench)),
            db: self
                .db
                .zip(before.db)
                .map(|(now, then)| cores(now.saturating_sub(then))),
            machine_busy: cores(self.machine.0.saturating_sub(before.machine.0)),
            machine_steal: cores(self.machine.1.saturating_sub(before.machine.1)),
        }
    }
}
