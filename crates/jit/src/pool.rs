//! Compile threads: the functions of one compile are compiled by Cranelift
//! in parallel, each on its own, largest first; the code does not depend on
//! the thread that compiled it.
//!
//! The threads live as long as the process (started when first needed):
//! a thread started for each compile took more time than it saved, because
//! its allocator begins with fresh memory that every compile paid page
//! faults for (GMM's gradient: its largest function compiled in 8.3 ms on a
//! new thread against 3.5 ms on a warm one). The calling thread works too,
//! and waits for the others only at the end. A panic in Cranelift is
//! caught where it happens and resumed on the calling thread, as if it had
//! compiled everything itself. A task no thread takes (none started, all
//! busy, or a child process after `fork`, which has none of them) is
//! compiled by the caller, so a compile never waits on a thread that does
//! not run.

use crate::{compile_one, JitError, Machine, Meta};
use cranelift_codegen::isa::OwnedTargetIsa;
use std::sync::{mpsc, Arc, Condvar, Mutex, OnceLock};

/// One function to compile.
pub(crate) struct Task {
    pub isa: OwnedTargetIsa,
    pub meta: Meta,
    pub func: cranelift_codegen::ir::Function,
    pub disasm: bool,
}

type Outcome = std::thread::Result<Result<Machine, JitError>>;

/// The tasks of one compile, shared by the threads that work on it.
struct Batch {
    /// Tasks left, by position; the largest last (taken first).
    tasks: Mutex<Vec<(usize, Task)>>,
    /// Outcomes by position, and how many are still missing.
    done: Mutex<(Vec<Option<Outcome>>, usize)>,
    finished: Condvar,
}

impl Batch {
    /// Compiles tasks until none is left.
    fn work(&self) {
        loop {
            let next = lock(&self.tasks).pop();
            let Some((at, t)) = next else {
                return;
            };
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                compile_one(&*t.isa, &t.meta, t.func, t.disasm)
            }));
            let mut done = lock(&self.done);
            done.0[at] = Some(outcome);
            done.1 -= 1;
            if done.1 == 0 {
                self.finished.notify_all();
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Nothing panics while holding these locks (compiles run outside them).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where batches are handed to the pool's threads; `None` when no thread
/// could be started (everything is then compiled by the caller).
static POOL: OnceLock<Option<Mutex<mpsc::Sender<Arc<Batch>>>>> = OnceLock::new();

/// The most pool threads (the caller makes one more).
const MAX_THREADS: usize = 3;
/// A pool thread's stack (Cranelift's passes are iterative; the usual
/// main-thread size).
const STACK: usize = 8 << 20;

fn pool() -> Option<&'static Mutex<mpsc::Sender<Arc<Batch>>>> {
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (tx, rx) = mpsc::channel::<Arc<Batch>>();
        let rx = Arc::new(Mutex::new(rx));
        let mut started = 0;
        for _ in 0..cores.saturating_sub(1).min(MAX_THREADS) {
            let rx = Arc::clone(&rx);
            let spawned = std::thread::Builder::new()
                .name("adze-jit-compile".into())
                .stack_size(STACK)
                .spawn(move || loop {
                    let batch = lock(&rx).recv();
                    match batch {
                        Ok(b) => b.work(),
                        Err(_) => return,
                    }
                });
            started += usize::from(spawned.is_ok());
        }
        (started > 0).then(|| Mutex::new(tx))
    })
    .as_ref()
}

/// Compiles `tasks` on up to `threads` threads (the caller's included);
/// the results in `tasks`' order.
pub(crate) fn compile(tasks: Vec<Task>, threads: usize) -> Vec<Result<Machine, JitError>> {
    let n = tasks.len();
    let mut indexed: Vec<(usize, Task)> = tasks.into_iter().enumerate().collect();
    indexed.sort_by_key(|(_, t)| t.meta.size);
    let batch = Arc::new(Batch {
        tasks: Mutex::new(indexed),
        done: Mutex::new(((0..n).map(|_| None).collect(), n)),
        finished: Condvar::new(),
    });
    if let Some(pool) = pool() {
        let tx = lock(pool);
        for _ in 1..threads {
            if tx.send(Arc::clone(&batch)).is_err() {
                break;
            }
        }
    }
    batch.work();
    let mut done = lock(&batch.done);
    while done.1 > 0 {
        done = batch.finished.wait(done).unwrap_or_else(|e| e.into_inner());
    }
    std::mem::take(&mut done.0)
        .into_iter()
        .map(|o| match o {
            Some(Ok(r)) => r,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => Err(JitError::Host("a function was not compiled".into())),
        })
        .collect()
}
