//! Every client's history, recorded under injected faults and checked
//! against the lease model, as etcd's robustness suite checks its
//! histories with Porcupine and Jepsen with Knossos.
//!
//! - [`history`]: what was recorded: each operation's send and answer
//!   instants, its outcome (`ok`, `fail`, `unknown`), the faults injected
//!   and the server's event log at the end.
//! - [`check`]: the checker. It decides whether the lease model explains
//!   the history and names the first violation it can prove.
//! - [`timeline`]: a violation's window drawn as text and as an HTML page
//!   with one lane per seat.
//! - [`synth`]: histories of a correct server made up in memory, to test
//!   the checker and to time it.
//! - [`record`]: the recording clients that speak HTTP to a real
//!   `leaseholdd`, and [`stall`]: a TCP proxy that holds connections.
//!
//! The scenarios that inject the faults are the tests in `tests/faults/`.

pub mod check;
pub mod history;
pub mod record;
pub mod stall;
pub mod synth;
pub mod timeline;
