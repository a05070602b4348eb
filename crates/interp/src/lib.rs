//! The reference interpreter of adze IR: slow, simple, and the oracle that the
//! JIT and every pass are tested against (SPEC §2).
//!
//! ```
//! use adze_interp::Interpreter;
//! use adze_ir::{Function, FuncBuilder, Module, Param, Signature, Type, Val};
//!
//! let sig = Signature { params: vec![Param::new("x", Type::F64)], results: vec![Type::F64] };
//! let mut func = Function::new("square", sig);
//! let mut b = FuncBuilder::new(&mut func);
//! let entry = b.create_entry_block();
//! b.switch_to_block(entry);
//! let x = b.func.params()[0];
//! let y = b.fmul(x, x);
//! b.ret(&[y]);
//! let mut module = Module::new();
//! let id = module.push(func).unwrap();
//!
//! let out = Interpreter::new(&module).call(id, &[Val::F64(3.0)]).unwrap();
//! assert_eq!(out.results, vec![Val::F64(9.0)]);
//! assert_eq!(out.args, vec![Val::F64(3.0)]);
//! ```
//!
//! # Semantics
//!
//! This is the contract the JIT implements identically, so that the two can be
//! compared bit for bit ([`adze_ir::Outcome::bit_eq`]) and error for error
//! ([`adze_ir::RunError`] is `PartialEq`).
//!
//! **Scalar operations.** Every scalar opcode is evaluated by the function of
//! [`adze_ir::semantics`] that defines it, never re-implemented here:
//! `fneg` and the one-operand intrinsics by `unary_f64`; `fadd fsub fmul
//! fdiv` and the two-operand intrinsics by `binary_f64`; `iadd isub imul
//! idiv irem` by `binary_i64` (wrapping, with `DivisionByZero` for `x / 0` and
//! `x % 0`, `DivisionOverflow` for `i64::MIN / -1` and `i64::MIN % -1`);
//! `powi` by `powi`; `fcmp`/`icmp` by `fcmp`/`icmp`; `sitof` by `sitof`.
//! `ineg x` is `binary_i64(isub, 0, x)` (wrapping: `-i64::MIN == i64::MIN`);
//! `not` is boolean negation; `select c, a, b` is `a` if `c` else `b`
//! (both operands are already evaluated values, so nothing is skipped).
//!
//! **Calls.** [`Interpreter::call`] first checks the arguments against the
//! signature with [`adze_ir::runtime::check_args`] (wrong count or type:
//! `BadArguments`, naming the function). Entering a function, the outermost
//! one included, checks, in this order:
//! 1. the call depth: the outermost call has depth 1, each nested call one
//!    more; a function whose depth would exceed `Limits::max_call_depth` is
//!    not entered and the run stops with `CallDepthExceeded { limit }`, whose
//!    `func` is that callee's name;
//! 2. the body: a declaration (a function without blocks) stops the run with
//!    ``Unsupported("function `f` has no body")``, `func` = the callee.
//!
//! The interpreter keeps an explicit frame stack and never recurses natively,
//! so the depth limit can be raised far beyond 1000 (a recursion 100 000
//! deep runs on a 2 MiB thread stack).
//!
//! **Arrays.** All arrays of one outermost call live in one heap. An array
//! value of the IR names a heap slot; calls pass the slot, so arrays are
//! passed by reference: a callee's writes are visible to its caller, and two
//! parameters bound to the same array alias each other (as two pointers would
//! in the JIT). The arguments of the outermost call are copied into the heap
//! first, and [`adze_ir::Outcome::args`] holds their final contents (scalar
//! arguments are returned unchanged).
//! - `zeros n, "t"`: `n < 0` or `n > Limits::max_array_len` stops the run with
//!   `BadArrayLength { len: n }`; otherwise it yields a new zero-filled array
//!   of length `n`, freed when the function that created it returns. Each
//!   execution of a `zeros` yields a fresh zero-filled array; the array made by
//!   a previous execution of the same instruction in the same frame is dead
//!   by SSA (array values only come from entry parameters and `zeros` and
//!   never flow through block parameters or results), so its storage is
//!   reused: a `zeros` inside a loop does not grow the heap.
//! - `load a, i` and `store a, i, x` with `i < 0` or `i >= len(a)` stop the run
//!   with `IndexOutOfBounds { array, index: i, len }`, where `array` is
//!   [`adze_ir::Function::array_name`] of the array operand (the parameter
//!   name, the `zeros` name, or `vN`) and `func` the function executing the
//!   instruction.
//! - `len a` is the length as i64; `fill a, x` sets every element.
//! - Writability (`mut`) is a static property checked by the verifier; the
//!   interpreter does not re-check it.
//!
//! **Control flow.** Execution starts at the entry block, whose parameters
//! are bound to the arguments. A branch evaluates all its block arguments
//! before assigning any parameter (parallel-copy semantics), so `jump
//! block1(v2, v1)` into `block1(v1, v2)` swaps. `return` hands the values back
//! to the caller, which binds them to the results of its `call`.
//!
//! **The tape.** One outermost call has one tape, a last-in-first-out stack
//! of scalars shared by every function of the call tree (reverse mode records
//! values there in the forward sweep and reads them back in the reverse
//! sweep). `push v` pushes the scalar `v`; `v = pop ty` pops the value pushed
//! last. Popping an empty tape, or a value of another type than `ty`, stops
//! the run with `TapeMismatch` in the function executing the `pop`. Values
//! left on the tape when the outermost call returns are discarded. A tape
//! that cannot grow (the memory cannot be had) stops the run with
//! `TapeOutOfMemory { entries, bytes }` in the function executing the
//! `push`, never an abort of the process.
//!
//! **Time limit.** With `Limits::timeout`, the run stops with
//! `Timeout { limit }` once the limit has passed since the call began: the
//! interpreter counts steps (a block's instructions at its branch, and at
//! each call and return) and reads the clock every 4096 steps; the error
//! names the function executing when the clock was read. Without a limit
//! the clock is never read.
//!
//! **`autodiff`.** Executing an `autodiff` request stops the run with
//! ``Unsupported("`autodiff` must be lowered by an AD pass before it can
//! run")`` in the function executing it. An unexecuted request is harmless.
//!
//! **Malformed IR.** The interpreter never panics, even on IR the verifier
//! would reject: a use of a value that has not been computed, an operand of
//! the wrong kind, an array passed through a block parameter or returned, a
//! branch to a missing block or with the wrong number of arguments, a block
//! without a terminator, a call to an unknown function or with arguments that
//! do not fit the callee's signature: each stops the run with
//! `Unsupported(..)` describing the problem.
#![forbid(unsafe_code)]

mod machine;

use adze_ir::runtime::check_args;
use adze_ir::{FuncId, Limits, Module, Outcome, RunError, TrapKind, Val};

/// Runs functions of one module. Holds no state between calls: each call
/// gets a fresh heap and frame stack.
#[derive(Clone, Copy, Debug)]
pub struct Interpreter<'m> {
    module: &'m Module,
    limits: Limits,
}

impl<'m> Interpreter<'m> {
    /// An interpreter with [`Limits::default`].
    pub fn new(module: &'m Module) -> Self {
        Interpreter::with_limits(module, Limits::default())
    }

    pub fn with_limits(module: &'m Module, limits: Limits) -> Self {
        Interpreter { module, limits }
    }

    pub fn module(&self) -> &'m Module {
        self.module
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Runs `func` on `args`; arrays are passed by reference to callees, so the
    /// returned [`Outcome::args`] hold the final contents of every array argument.
    pub fn call(&self, func: FuncId, args: &[Val]) -> Result<Outcome, RunError> {
        if !self.module.is_valid(func) {
            return Err(RunError::new(
                func.to_string(),
                TrapKind::Unsupported(format!("function {func} is not in the module")),
            ));
        }
        let f = self.module.func(func);
        check_args(&f.name, &f.sig, args)?;
        let longest = args.iter().map(|a| match a {
            Val::Array(xs) => xs.len(),
            Val::IArray(xs) => xs.len(),
            _ => 0,
        });
        if longest.max().unwrap_or(0) > u32::MAX as usize {
            return Err(RunError::new(
                f.name.clone(),
                TrapKind::BadArguments(format!(
                    "the interpreter takes arrays of at most {} elements",
                    u32::MAX
                )),
            ));
        }
        machine::Machine::new(self.module, self.limits).run(func, args)
    }

    /// Runs the function called `name` (see [`Interpreter::call`]).
    pub fn call_by_name(&self, name: &str, args: &[Val]) -> Result<Outcome, RunError> {
        match self.module.get(name) {
            Some(id) => self.call(id, args),
            None => Err(RunError::new(
                name,
                TrapKind::Unsupported(format!("there is no function `{name}` in the module")),
            )),
        }
    }
}

/// Runs the function called `name` of `module` with the default limits.
pub fn run_by_name(module: &Module, name: &str, args: &[Val]) -> Result<Outcome, RunError> {
    Interpreter::new(module).call_by_name(name, args)
}
