//! The time limit of compiled code (`Limits::timeout`).
//!
//! Code compiled with a time limit polls a flag at every function entry and
//! loop header (see `codegen`); a call arms a timer ([`arm`]) whose flag
//! the code polls, and the timer sets it when the deadline passes. The
//! code then takes its trap path, which frees every frame's arrays, and the
//! call returns `TrapKind::Timeout`.
//!
//! One thread serves every timer of the process: it is started by the
//! first call with a time limit and then sleeps until the earliest
//! deadline (or forever, when no call with a limit is running). Arming and
//! disarming a timer is a lock and a map insertion or removal, about a
//! microsecond, where a watchdog thread per call would cost tens of
//! microseconds to start and join; calls without a limit never touch it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The pending deadlines, earliest first, each with the flag to set (the
/// number makes equal instants distinct).
struct State {
    pending: BTreeMap<(Instant, u64), Arc<AtomicBool>>,
    next: u64,
    started: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    pending: BTreeMap::new(),
    next: 0,
    started: false,
});

/// Wakes the timer thread when a deadline earlier than the ones it waits
/// for is added.
static WAKE: Condvar = Condvar::new();

/// A flag no timer ever sets, polled by code compiled with a time limit
/// when it is run without one armed (never: [`arm`] is called for every
/// call of such code; this is only the context's initial value).
pub(crate) static NEVER: AtomicBool = AtomicBool::new(false);

/// The lock, whether or not a thread panicked while holding it: the state
/// is a map that every operation leaves consistent.
fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// An armed timer: its flag is set once its deadline has passed. Dropping
/// it disarms it.
pub(crate) struct Armed {
    flag: Arc<AtomicBool>,
    key: Option<(Instant, u64)>,
}

impl Armed {
    /// The flag the compiled code polls.
    pub(crate) fn flag(&self) -> &AtomicBool {
        &self.flag
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            state().pending.remove(&key);
        }
    }
}

/// Arms a timer that sets its flag `timeout` from now. A timeout too long
/// to be represented as an instant never fires. Fails only if the timer
/// thread cannot be started.
pub(crate) fn arm(timeout: Duration) -> Result<Armed, String> {
    let flag = Arc::new(AtomicBool::new(false));
    let Some(deadline) = Instant::now().checked_add(timeout) else {
        return Ok(Armed { flag, key: None });
    };
    let mut st = state();
    if !st.started {
        std::thread::Builder::new()
            .name("adze-timeout".into())
            .stack_size(64 << 10)
            .spawn(run)
            .map_err(|e| format!("cannot start the timer thread of `--timeout`: {e}"))?;
        st.started = true;
    }
    let key = (deadline, st.next);
    st.next += 1;
    let earliest = st.pending.keys().next().is_none_or(|k| key < *k);
    st.pending.insert(key, flag.clone());
    drop(st);
    if earliest {
        WAKE.notify_one();
    }
    Ok(Armed {
        flag,
        key: Some(key),
    })
}

/// The timer thread: sets the flag of every deadline that has passed, then
/// sleeps until the next one.
fn run() {
    let mut st = state();
    loop {
        let now = Instant::now();
        while let Some(entry) = st.pending.first_entry() {
            if entry.key().0 > now {
                break;
            }
            entry.remove().store(true, Ordering::Relaxed);
        }
        st = match st.pending.keys().next() {
            Some(&(deadline, _)) => {
                WAKE.wait_timeout(st, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            None => WAKE.wait(st).unwrap_or_else(|e| e.into_inner()),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timer_fires_after_its_deadline_and_not_once_disarmed() {
        let late = arm(Duration::from_secs(3600)).unwrap();
        let soon = arm(Duration::from_millis(20)).unwrap();
        let begin = Instant::now();
        while !soon.flag().load(Ordering::Relaxed) {
            assert!(begin.elapsed() < Duration::from_secs(60), "never fired");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(begin.elapsed() >= Duration::from_millis(15));
        assert!(!late.flag().load(Ordering::Relaxed));
        let key = late.key.unwrap();
        drop(late);
        assert!(!state().pending.contains_key(&key));
        // A limit beyond what an `Instant` can hold never fires.
        let never = arm(Duration::MAX).unwrap();
        assert!(never.key.is_none());
    }
}
