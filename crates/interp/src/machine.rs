//! The execution engine: a heap of arrays, an explicit stack of frames, and
//! a loop that runs one frame's instructions until it calls or returns.
//!
//! No Rust recursion: a call suspends the caller's [`Frame`] on a stack and
//! makes the callee's frame current; a return pops the caller back. The crate
//! doc lists the semantics this implements.

use adze_ir::semantics;
use adze_ir::{
    BlockCall, FuncId, Function, Inst, InstData, Limits, Module, Opcode, Outcome, RunError,
    TrapKind, Type, Val, Value,
};
use cranelift_entity::SecondaryMap;
use std::time::Instant;

/// With a time limit, the clock is read once every this many steps
/// (instructions, counted per block at its branch and at calls and
/// returns): a few microseconds of interpretation, so the check costs
/// nothing measurable and a run stops within well under a millisecond of
/// its limit.
const CLOCK_EVERY: i64 = 4096;

/// The run-time content of one SSA value in a frame.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum Slot {
    /// Not computed yet (only malformed IR reads one).
    #[default]
    Undef,
    F64(f64),
    I64(i64),
    Bool(bool),
    /// Two f64 lanes (`f64x2`).
    F64x2([f64; 2]),
    /// A view of an array of [`Machine::heap`].
    Array(View),
    /// A view of an i64 array of [`Machine::heap`], whose cells hold the
    /// elements' bit patterns (`f64::from_bits`), so that both kinds of
    /// array share the heap and its reuse.
    IArray(View),
}

/// Elements `lo..lo + len` of the array `heap` of [`Machine::heap`]: a whole
/// array (a parameter, a `zeros`) or a `slice` of one. (`u32`s keep a
/// [`Slot`] at two words; arrays are at most `MAX_ARRAY_LEN` long and
/// arguments are checked on entry; an `f64x2`'s two lanes make a slot
/// three words.)
#[derive(Clone, Copy, Debug, PartialEq)]
struct View {
    heap: u32,
    lo: u32,
    len: u32,
}

/// Do the views share an element: both of one array, both non-empty, and
/// their ranges meet? (An empty view shares nothing, wherever it starts:
/// the JIT compares pointers and lengths the same way.)
fn share_an_element(x: View, y: View) -> bool {
    let (rx, ry) = (x.range(), y.range());
    x.heap == y.heap && !rx.is_empty() && !ry.is_empty() && rx.start < ry.end && ry.start < rx.end
}

impl View {
    /// The whole array number `heap`, `len` elements long.
    fn whole(heap: usize, len: usize) -> View {
        View {
            heap: heap as u32,
            lo: 0,
            len: len as u32,
        }
    }

    fn range(self) -> std::ops::Range<usize> {
        self.lo as usize..self.lo as usize + self.len as usize
    }
}

impl Slot {
    fn ty(self) -> Option<Type> {
        match self {
            Slot::Undef => None,
            Slot::F64(_) => Some(Type::F64),
            Slot::F64x2(_) => Some(Type::F64x2),
            Slot::I64(_) => Some(Type::I64),
            Slot::Bool(_) => Some(Type::Bool),
            Slot::Array(_) => Some(Type::Array),
            Slot::IArray(_) => Some(Type::IArray),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Slot::Undef => "undefined",
            Slot::F64(_) => "an f64",
            Slot::F64x2(_) => "an f64x2",
            Slot::I64(_) => "an i64",
            Slot::Bool(_) => "a bool",
            Slot::Array(_) => "an array",
            Slot::IArray(_) => "an i64 array",
        }
    }
}

/// The error type inside the engine: boxed, so that the `Result`s of the hot
/// paths stay small (a `Result<Slot, Fault>` is five words and its moves
/// dominated the run time).
type Fault = Box<RunError>;

#[cold]
#[inline(never)]
fn unsupported(func: &Function, msg: impl Into<String>) -> Fault {
    Box::new(RunError::new(
        func.error_name(),
        TrapKind::Unsupported(msg.into()),
    ))
}

#[cold]
#[inline(never)]
fn trap(func: &Function, kind: TrapKind) -> Fault {
    Box::new(RunError::new(func.error_name(), kind))
}

/// The slots of one frame, by value. Reading a value the table does not
/// hold gives [`Slot::Undef`] (the map's default); writing one grows the
/// table.
struct Values(SecondaryMap<Value, Slot>);

impl Values {
    /// A table of `len` undefined slots, or `None` if the memory cannot be
    /// had (a deep recursion of a big function).
    fn new(len: usize) -> Option<Values> {
        let mut v = SecondaryMap::new();
        v.try_resize(len).ok()?;
        Some(Values(v))
    }

    #[inline(always)]
    fn read(&self, v: Value) -> Slot {
        self.0[v]
    }

    #[inline(always)]
    fn write(&mut self, v: Value, slot: Slot) {
        self.0[v] = slot;
    }
}

/// One activation of a function.
struct Frame<'m> {
    func: &'m Function,
    values: Values,
    block: adze_ir::Block,
    /// Position of the next instruction to run in `block`; while a call is
    /// under way, the position of that call.
    pc: usize,
    /// Heap slots from here on were allocated by this frame (or its callees,
    /// which have returned): they are freed when it returns.
    heap_base: usize,
}

impl Frame<'_> {
    #[inline]
    fn get(&self, v: Value) -> Result<Slot, Fault> {
        match self.values.read(v) {
            Slot::Undef => Err(unsupported(
                self.func,
                format!("{v} is used before it is computed"),
            )),
            s => Ok(s),
        }
    }

    #[cold]
    #[inline(never)]
    fn wrong_kind(&self, v: Value, want: &str, got: Slot) -> Fault {
        unsupported(
            self.func,
            format!("{v} should be {want} but is {}", got.describe()),
        )
    }

    #[inline]
    fn f64(&self, v: Value) -> Result<f64, Fault> {
        match self.get(v)? {
            Slot::F64(x) => Ok(x),
            s => Err(self.wrong_kind(v, "an f64", s)),
        }
    }

    #[inline]
    fn f64x2(&self, v: Value) -> Result<[f64; 2], Fault> {
        match self.get(v)? {
            Slot::F64x2(x) => Ok(x),
            s => Err(self.wrong_kind(v, "an f64x2", s)),
        }
    }

    #[inline]
    fn i64(&self, v: Value) -> Result<i64, Fault> {
        match self.get(v)? {
            Slot::I64(x) => Ok(x),
            s => Err(self.wrong_kind(v, "an i64", s)),
        }
    }

    #[inline]
    fn bool(&self, v: Value) -> Result<bool, Fault> {
        match self.get(v)? {
            Slot::Bool(x) => Ok(x),
            s => Err(self.wrong_kind(v, "a bool", s)),
        }
    }

    #[inline]
    fn array(&self, v: Value) -> Result<View, Fault> {
        match self.get(v)? {
            Slot::Array(x) | Slot::IArray(x) => Ok(x),
            s => Err(self.wrong_kind(v, "an array", s)),
        }
    }

    /// Binds the single result of `inst`.
    #[inline(always)]
    fn set(&mut self, inst: Inst, slot: Slot) -> Result<(), Fault> {
        match self.func.dfg.inst_results(inst) {
            &[r] => {
                self.values.write(r, slot);
                Ok(())
            }
            rs => Err(unsupported(
                self.func,
                format!(
                    "`{}` should have one result, not {}",
                    self.func.dfg.inst(inst).opcode(),
                    rs.len()
                ),
            )),
        }
    }

    /// The single result value of `inst`.
    #[inline]
    fn result(&self, inst: Inst) -> Result<Value, Fault> {
        match self.func.dfg.inst_results(inst) {
            &[r] => Ok(r),
            rs => Err(unsupported(
                self.func,
                format!(
                    "`{}` should have one result, not {}",
                    self.func.dfg.inst(inst).opcode(),
                    rs.len()
                ),
            )),
        }
    }

    /// The view `v` names, checked against the heap.
    #[inline]
    fn heap_slot(&self, v: Value, heap: &[Vec<f64>]) -> Result<View, Fault> {
        let a = self.array(v)?;
        if heap
            .get(a.heap as usize)
            .is_some_and(|data| a.range().end <= data.len())
        {
            Ok(a)
        } else {
            Err(unsupported(
                self.func,
                format!("{v} names an array that no longer exists"),
            ))
        }
    }

    /// Checks `index` against the length of array `array`.
    #[inline]
    fn index(&self, array: Value, index: i64, len: usize) -> Result<usize, Fault> {
        match usize::try_from(index) {
            Ok(i) if i < len => Ok(i),
            _ => Err(trap(
                self.func,
                TrapKind::IndexOutOfBounds {
                    array: self.func.array_name(array),
                    index,
                    len: i64::try_from(len).unwrap_or(i64::MAX),
                },
            )),
        }
    }
}

/// What stopped [`Machine::exec`]: a call to make (its arguments are in
/// `Machine::scratch`) or a return (the results are in `Machine::scratch`).
enum Step {
    Call(FuncId),
    Return,
}

/// The state of one outermost call.
pub(crate) struct Machine<'m> {
    module: &'m Module,
    limits: Limits,
    /// Every live array of the call tree. Allocation is stack-like: a frame's
    /// arrays sit above its callers', and are dropped by truncation.
    heap: Vec<Vec<f64>>,
    /// Call arguments, return values and branch arguments in transit.
    scratch: Vec<Slot>,
    /// The tapes of `push` and `pop` (indexed by tape number): one set per
    /// outermost call.
    tapes: Vec<Vec<Slot>>,
    /// Steps left until the clock is read again ([`Machine::tick`]): with
    /// no time limit it starts at `i64::MAX` and never runs out.
    steps: i64,
    /// When the run must stop (`Limits::timeout` after it started).
    deadline: Option<Instant>,
}

impl<'m> Machine<'m> {
    pub(crate) fn new(module: &'m Module, limits: Limits) -> Machine<'m> {
        // A limit too far away to be represented is no limit.
        let deadline = limits.timeout.and_then(|t| Instant::now().checked_add(t));
        Machine {
            module,
            limits,
            heap: Vec::new(),
            scratch: Vec::new(),
            tapes: vec![Vec::new(); usize::from(adze_ir::MAX_TAPES)],
            steps: if deadline.is_some() {
                CLOCK_EVERY
            } else {
                i64::MAX
            },
            deadline,
        }
    }

    /// Counts `n` steps of `func`; every [`CLOCK_EVERY`] steps, stops the
    /// run with `Timeout` if its deadline has passed. Called at every
    /// branch, call and return, so no run escapes it: a run that does not
    /// end branches or calls without end.
    #[inline(always)]
    fn tick(&mut self, n: usize, func: &Function) -> Result<(), Fault> {
        self.steps -= n as i64;
        if self.steps < 0 {
            self.read_clock(func)
        } else {
            Ok(())
        }
    }

    #[cold]
    #[inline(never)]
    fn read_clock(&mut self, func: &Function) -> Result<(), Fault> {
        match (self.deadline, self.limits.timeout) {
            (Some(deadline), Some(limit)) => {
                self.steps = CLOCK_EVERY;
                if Instant::now() >= deadline {
                    return Err(trap(func, TrapKind::Timeout { limit }));
                }
            }
            _ => self.steps = i64::MAX,
        }
        Ok(())
    }

    /// Runs `root` on `args` (already checked against its signature).
    pub(crate) fn run(self, root: FuncId, args: &[Val]) -> Result<Outcome, RunError> {
        self.run_boxed(root, args).map_err(|e| *e)
    }

    fn run_boxed(mut self, root: FuncId, args: &[Val]) -> Result<Outcome, Fault> {
        let arg_slots: Vec<Slot> = args
            .iter()
            .map(|a| match a {
                Val::F64(x) => Slot::F64(*x),
                Val::I64(x) => Slot::I64(*x),
                Val::Bool(x) => Slot::Bool(*x),
                Val::Array(xs) => {
                    self.heap.push(xs.clone());
                    Slot::Array(View::whole(self.heap.len() - 1, xs.len()))
                }
                Val::IArray(xs) => {
                    self.heap
                        .push(xs.iter().map(|&x| semantics::frombits(x)).collect());
                    Slot::IArray(View::whole(self.heap.len() - 1, xs.len()))
                }
            })
            .collect();

        let mut stack: Vec<Frame<'m>> = Vec::new();
        let mut frame = self.enter(root, &arg_slots, 1)?;
        let root_func = frame.func;
        loop {
            let step = self.exec(&mut frame).map_err(|mut e| {
                // A fault of an instruction names where that code came from
                // in the source and, for inlined code, the functions it was
                // inlined from (the JIT records the same per trap site).
                if e.kind.is_at_instruction() && e.func == frame.func.error_name() {
                    e.inlined = frame.func.inlined_chain(frame.block);
                    e.loc = self.location(&frame).map(Box::new);
                }
                e
            })?;
            match step {
                Step::Call(callee) => {
                    let depth = stack.len() as u64 + 2;
                    let args = std::mem::take(&mut self.scratch);
                    let entered = self.enter(callee, &args, depth);
                    self.scratch = args;
                    // A call-depth fault is the callee's, at the call.
                    let entered = entered.map_err(|mut e| {
                        if matches!(e.kind, TrapKind::CallDepthExceeded { .. }) {
                            e.loc = self.location(&frame).map(Box::new);
                        }
                        e
                    })?;
                    if stack.try_reserve(1).is_err() {
                        return Err(frames_out_of_memory(entered.func, depth));
                    }
                    stack.push(std::mem::replace(&mut frame, entered));
                }
                Step::Return => {
                    let returned = self.free_frame(frame.heap_base);
                    match stack.pop() {
                        None => break,
                        Some(caller) => {
                            frame = caller;
                            self.bind_call_results(&mut frame, returned)?;
                        }
                    }
                }
            }
        }

        let results = self
            .scratch
            .iter()
            .map(|s| match *s {
                Slot::F64(x) => Ok(Val::F64(x)),
                Slot::I64(x) => Ok(Val::I64(x)),
                Slot::Bool(x) => Ok(Val::Bool(x)),
                // `free_frame` put each returned array back as a whole one.
                Slot::Array(v) => Ok(Val::Array(
                    self.heap.get(v.heap as usize).cloned().unwrap_or_default(),
                )),
                Slot::IArray(v) => Ok(Val::IArray(
                    self.heap
                        .get(v.heap as usize)
                        .map(|xs| xs.iter().map(|&x| semantics::tobits(x)).collect())
                        .unwrap_or_default(),
                )),
                s => Err(unsupported(
                    root_func,
                    format!("cannot return {} value", s.describe()),
                )),
            })
            .collect::<Result<Vec<Val>, Fault>>()?;
        let args = args
            .iter()
            .zip(arg_slots)
            .map(|(a, s)| match s {
                Slot::Array(i) => Val::Array(
                    self.heap
                        .get_mut(i.heap as usize)
                        .map(std::mem::take)
                        .unwrap_or_default(),
                ),
                Slot::IArray(i) => Val::IArray(
                    self.heap
                        .get(i.heap as usize)
                        .map(|xs| xs.iter().map(|&x| semantics::tobits(x)).collect())
                        .unwrap_or_default(),
                ),
                _ => a.clone(),
            })
            .collect();
        Ok(Outcome { results, args })
    }

    /// The source location of the instruction `frame` is at (a fault's:
    /// the engine stops on the faulting instruction).
    fn location(&self, frame: &Frame<'m>) -> Option<adze_ir::Location> {
        let inst = *frame.func.layout.block_insts(frame.block).get(frame.pc)?;
        self.module.location(frame.func.dfg.srcloc(inst))
    }

    /// Makes the frame of a call to `callee` at call depth `depth`.
    fn enter(&self, callee: FuncId, args: &[Slot], depth: u64) -> Result<Frame<'m>, Fault> {
        if !self.module.is_valid(callee) {
            return Err(Box::new(RunError::new(
                callee.to_string(),
                TrapKind::Unsupported(format!("function {callee} is not in the module")),
            )));
        }
        let func = self.module.func(callee);
        if depth > u64::from(self.limits.max_call_depth) {
            return Err(trap(
                func,
                TrapKind::CallDepthExceeded {
                    limit: self.limits.max_call_depth,
                },
            ));
        }
        let Some(entry) = func.entry_block() else {
            return Err(unsupported(
                func,
                format!("function `{}` has no body", func.name),
            ));
        };
        let params = func.dfg.block_params(entry);
        if params.len() != args.len() || func.sig.params.len() != args.len() {
            return Err(unsupported(
                func,
                format!(
                    "called with {} argument(s), but `{}` takes {}",
                    args.len(),
                    func.name,
                    func.sig.params.len()
                ),
            ));
        }
        let mut values =
            Values::new(func.dfg.num_values()).ok_or_else(|| frames_out_of_memory(func, depth))?;
        for ((&v, &a), p) in params.iter().zip(args).zip(&func.sig.params) {
            if a.ty() != Some(p.ty) {
                return Err(unsupported(
                    func,
                    format!(
                        "argument `{}` should be {} but is {}",
                        p.name,
                        p.ty,
                        a.describe()
                    ),
                ));
            }
            values.write(v, a);
        }
        Ok(Frame {
            func,
            values,
            block: entry,
            pc: 0,
            heap_base: self.heap.len(),
        })
    }

    /// Binds the values in `scratch` to the results of the call `frame` is at,
    /// and moves past it.
    /// Frees the arrays of the returning frame (those from `heap_base`
    /// on), except the arrays it returns (in `scratch`: `ret` checked that
    /// each is a whole array of this frame), which move down to the top of
    /// the heap; their slots in `scratch` follow. Returns how many moved.
    fn free_frame(&mut self, heap_base: usize) -> usize {
        let mut kept = Vec::new();
        for s in &mut self.scratch {
            if let Slot::Array(v) | Slot::IArray(v) = s {
                kept.push(std::mem::take(&mut self.heap[v.heap as usize]));
            }
        }
        self.heap.truncate(heap_base);
        let n = kept.len();
        let mut kept = kept.into_iter();
        for s in &mut self.scratch {
            if let Slot::Array(v) | Slot::IArray(v) = s {
                self.heap.extend(kept.next());
                v.heap = (self.heap.len() - 1) as u32;
            }
        }
        n
    }

    /// Binds the results in `scratch` of the call `frame` is at. The
    /// `returned` arrays on top of the heap (see `free_frame`) become this
    /// frame's: each takes the heap cell of the array the same call made
    /// the last time it ran in this frame, which is dead by SSA (as for
    /// `zeros`), so a call in a loop does not grow the heap.
    fn bind_call_results(&mut self, frame: &mut Frame<'m>, returned: usize) -> Result<(), Fault> {
        let func = frame.func;
        let Some(&inst) = func.layout.block_insts(frame.block).get(frame.pc) else {
            return Err(unsupported(
                func,
                "a call returned to a missing instruction",
            ));
        };
        let results = func.dfg.inst_results(inst);
        if results.len() != self.scratch.len() {
            return Err(unsupported(
                func,
                format!(
                    "the call has {} result(s) but the callee returned {}",
                    results.len(),
                    self.scratch.len()
                ),
            ));
        }
        let top = self.heap.len() - returned;
        let mut fresh: Vec<Vec<f64>> = self.heap.drain(top..).collect();
        for (&r, s) in results.iter().zip(&mut self.scratch) {
            if let Slot::Array(v) | Slot::IArray(v) = s {
                let data = std::mem::take(&mut fresh[v.heap as usize - top]);
                let old = match frame.values.read(r) {
                    Slot::Array(o) | Slot::IArray(o)
                        if o.heap as usize >= frame.heap_base && (o.heap as usize) < top =>
                    {
                        Some(o.heap as usize)
                    }
                    _ => None,
                };
                let k = match old {
                    Some(k) => {
                        self.heap[k] = data;
                        k
                    }
                    None => {
                        self.heap.push(data);
                        self.heap.len() - 1
                    }
                };
                v.heap = k as u32;
            }
            frame.values.write(r, *s);
        }
        frame.pc += 1;
        Ok(())
    }

    /// Runs `frame` until it calls or returns: the instructions that
    /// compute a value or an effect are run by one method per format
    /// (below), control flow here.
    fn exec(&mut self, frame: &mut Frame<'m>) -> Result<Step, Fault> {
        let func = frame.func;
        loop {
            let insts = func.layout.block_insts(frame.block);
            loop {
                let Some(&inst) = insts.get(frame.pc) else {
                    return Err(unsupported(
                        func,
                        format!("{} ends without a terminator", frame.block),
                    ));
                };
                match func.dfg.inst(inst) {
                    InstData::FConst { bits } => {
                        frame.set(inst, Slot::F64(f64::from_bits(*bits)))?
                    }
                    InstData::IConst { imm } => frame.set(inst, Slot::I64(*imm))?,
                    InstData::BConst { imm } => frame.set(inst, Slot::Bool(*imm))?,
                    InstData::Unary { op, arg } => self.unary(frame, inst, *op, *arg)?,
                    InstData::Binary { op, args } => self.binary(frame, inst, *op, *args)?,
                    InstData::Ternary { op, args } => self.ternary(frame, inst, *op, *args)?,
                    InstData::Powi {
                        op: Opcode::Vpowi,
                        arg,
                        exp,
                    } => {
                        let r = semantics::lanes_powi(frame.f64x2(*arg)?, *exp);
                        frame.set(inst, Slot::F64x2(r))?;
                    }
                    InstData::Powi { arg, exp, .. } => {
                        frame.set(inst, Slot::F64(semantics::powi(frame.f64(*arg)?, *exp)))?;
                    }
                    InstData::Cmp {
                        op,
                        cond,
                        args: [a, b],
                    } => {
                        let r = match *op {
                            Opcode::Fcmp => semantics::fcmp(*cond, frame.f64(*a)?, frame.f64(*b)?),
                            Opcode::Icmp => semantics::icmp(*cond, frame.i64(*a)?, frame.i64(*b)?),
                            op => return Err(bad_format(func, op, "a condition")),
                        };
                        frame.set(inst, Slot::Bool(r))?;
                    }
                    InstData::Zeros { len, .. } => self.zeros(frame, inst, *len)?,
                    InstData::Push { tape, arg } => self.push(frame, *tape, *arg)?,
                    InstData::Pop { tape, ty, .. } => {
                        let x = self
                            .tapes
                            .get_mut(usize::from(*tape))
                            .and_then(Vec::pop)
                            .filter(|x| x.ty() == Some(*ty) && ty.is_scalar())
                            .ok_or_else(|| trap(func, TrapKind::TapeMismatch))?;
                        frame.set(inst, x)?;
                    }
                    InstData::Tape { op, tape, arg } => {
                        let t = self
                            .tapes
                            .get_mut(usize::from(*tape))
                            .ok_or_else(|| trap(func, TrapKind::TapeMismatch))?;
                        let len = t.len() as i64;
                        let mark = match arg {
                            Some(m) => frame.i64(*m)?,
                            None => 0,
                        };
                        match op {
                            Opcode::Tapecut => {
                                if !(0..=len).contains(&mark) {
                                    return Err(trap(func, TrapKind::TapeMismatch));
                                }
                                t.truncate(mark as usize);
                            }
                            Opcode::Tapelen => frame.set(inst, Slot::I64(len))?,
                            Opcode::Tapeover => {
                                let seg = self.limits.segment_entries();
                                let seg = i64::try_from(seg).unwrap_or(i64::MAX);
                                frame.set(inst, Slot::Bool(len - mark >= seg))?;
                            }
                            op => return Err(bad_format(func, *op, "a tape")),
                        }
                    }
                    InstData::Call { func: callee, args } => {
                        self.tick(frame.pc + 1, func)?;
                        self.scratch.clear();
                        for &a in args {
                            self.scratch.push(frame.get(a)?);
                        }
                        return Ok(Step::Call(*callee));
                    }
                    InstData::Autodiff { .. } => {
                        return Err(unsupported(
                            func,
                            "`autodiff` must be lowered by an AD pass before it can run",
                        ));
                    }
                    InstData::Jump { dest } => {
                        self.tick(frame.pc + 1, func)?;
                        self.branch(frame, dest)?;
                        break;
                    }
                    InstData::Brif {
                        cond,
                        then_dest,
                        else_dest,
                    } => {
                        let dest = if frame.bool(*cond)? {
                            then_dest
                        } else {
                            else_dest
                        };
                        self.tick(frame.pc + 1, func)?;
                        self.branch(frame, dest)?;
                        break;
                    }
                    InstData::Return { args } => return self.ret(frame, args),
                }
                frame.pc += 1;
            }
        }
    }

    /// An instruction of the `Unary` format.
    #[inline(always)]
    fn unary(
        &mut self,
        frame: &mut Frame<'m>,
        inst: Inst,
        op: Opcode,
        arg: Value,
    ) -> Result<(), Fault> {
        use Opcode::*;
        let func = frame.func;
        let r = match op {
            // A hint to reverse mode; running it does nothing.
            Checkpoint => return Ok(()),
            op if semantics::is_unary_f64(op) => {
                Slot::F64(semantics::unary_f64(op, frame.f64(arg)?))
            }
            Ineg => Slot::I64(
                semantics::binary_i64(Isub, 0, frame.i64(arg)?).map_err(|k| trap(func, k))?,
            ),
            Not => Slot::Bool(!frame.bool(arg)?),
            Sitof => Slot::F64(semantics::sitof(frame.i64(arg)?)),
            Ftosi => Slot::I64(semantics::ftosi(frame.f64(arg)?).map_err(|k| trap(func, k))?),
            Tobits => Slot::I64(semantics::tobits(frame.f64(arg)?)),
            Frombits => Slot::F64(semantics::frombits(frame.i64(arg)?)),
            Len | Ilen => Slot::I64(i64::from(frame.heap_slot(arg, &self.heap)?.len)),
            Vsplat => Slot::F64x2([frame.f64(arg)?; 2]),
            Vlane0 => Slot::F64(frame.f64x2(arg)?[0]),
            Vlane1 => Slot::F64(frame.f64x2(arg)?[1]),
            op if op.lane_op().is_some() => match semantics::lanes_unary(op, frame.f64x2(arg)?) {
                Some(r) => Slot::F64x2(r),
                None => return Err(bad_format(func, op, "one operand")),
            },
            op => return Err(bad_format(func, op, "one operand")),
        };
        frame.set(inst, r)
    }

    /// An instruction of the `Binary` format.
    #[inline(always)]
    fn binary(
        &mut self,
        frame: &mut Frame<'m>,
        inst: Inst,
        op: Opcode,
        [a, b]: [Value; 2],
    ) -> Result<(), Fault> {
        use Opcode::*;
        let func = frame.func;
        match op {
            op if semantics::is_binary_f64(op) => {
                let r = semantics::binary_f64(op, frame.f64(a)?, frame.f64(b)?);
                frame.set(inst, Slot::F64(r))?;
            }
            op if semantics::is_binary_i64(op) => {
                let r = semantics::binary_i64(op, frame.i64(a)?, frame.i64(b)?)
                    .map_err(|k| trap(func, k))?;
                frame.set(inst, Slot::I64(r))?;
            }
            Vpack => frame.set(inst, Slot::F64x2([frame.f64(a)?, frame.f64(b)?]))?,
            Vshift => {
                let (x, y) = (frame.f64x2(a)?, frame.f64x2(b)?);
                frame.set(inst, Slot::F64x2([x[1], y[0]]))?;
            }
            Apart => {
                let x = frame.heap_slot(a, &self.heap)?;
                let y = frame.heap_slot(b, &self.heap)?;
                // As `disjoint`, without the trap.
                frame.set(inst, Slot::Bool(!share_an_element(x, y)))?;
            }
            op if op.lane_op().is_some() => {
                match semantics::lanes_binary(op, frame.f64x2(a)?, frame.f64x2(b)?) {
                    Some(r) => frame.set(inst, Slot::F64x2(r))?,
                    None => return Err(bad_format(func, op, "two operands")),
                }
            }
            Vload => {
                let arr = frame.heap_slot(a, &self.heap)?;
                let data = &self.heap[arr.heap as usize][arr.range()];
                let i = frame.i64(b)?;
                let lo = frame.index(a, i, data.len())?;
                let hi = frame.index(a, i.wrapping_add(1), data.len())?;
                frame.set(inst, Slot::F64x2([data[lo], data[hi]]))?;
            }
            Load | Iload => {
                let arr = frame.heap_slot(a, &self.heap)?;
                let data = &self.heap[arr.heap as usize][arr.range()];
                let i = frame.index(a, frame.i64(b)?, data.len())?;
                let x = if op == Load {
                    Slot::F64(data[i])
                } else {
                    Slot::I64(semantics::tobits(data[i]))
                };
                frame.set(inst, x)?;
            }
            Fill => {
                let arr = frame.heap_slot(a, &self.heap)?;
                let x = frame.f64(b)?;
                self.heap[arr.heap as usize][arr.range()].fill(x);
            }
            Ifill => {
                let arr = frame.heap_slot(a, &self.heap)?;
                let x = semantics::frombits(frame.i64(b)?);
                self.heap[arr.heap as usize][arr.range()].fill(x);
            }
            SameLen => {
                let x = frame.heap_slot(a, &self.heap)?;
                let y = frame.heap_slot(b, &self.heap)?;
                if x.len != y.len {
                    let kind = TrapKind::ShadowLengthMismatch {
                        array: func.array_name(a),
                        shadow: func.array_name(b),
                    };
                    return Err(trap(func, kind));
                }
            }
            Disjoint => {
                let x = frame.heap_slot(a, &self.heap)?;
                let y = frame.heap_slot(b, &self.heap)?;
                if share_an_element(x, y) {
                    let kind = TrapKind::OverlappingArrays {
                        first: func.array_name(a),
                        second: func.array_name(b),
                    };
                    return Err(trap(func, kind));
                }
            }
            op => return Err(bad_format(func, op, "two operands")),
        }
        Ok(())
    }

    /// An instruction of the `Ternary` format.
    #[inline(always)]
    fn ternary(
        &mut self,
        frame: &mut Frame<'m>,
        inst: Inst,
        op: Opcode,
        [a, b, c]: [Value; 3],
    ) -> Result<(), Fault> {
        let func = frame.func;
        match op {
            Opcode::Select => {
                let cond = frame.bool(a)?;
                let (x, y) = (frame.get(b)?, frame.get(c)?);
                if x.ty() != y.ty() || matches!(x, Slot::Array(_) | Slot::IArray(_)) {
                    return Err(unsupported(
                        func,
                        format!(
                            "`select` needs two scalars of one type, got {} and {}",
                            x.describe(),
                            y.describe()
                        ),
                    ));
                }
                frame.set(inst, if cond { x } else { y })?;
            }
            Opcode::Vstore => {
                let arr = frame.heap_slot(a, &self.heap)?;
                let x = frame.f64x2(c)?;
                let data = &mut self.heap[arr.heap as usize][arr.range()];
                let i = frame.i64(b)?;
                let lo = frame.index(a, i, data.len())?;
                let hi = frame.index(a, i.wrapping_add(1), data.len())?;
                data[lo] = x[0];
                data[hi] = x[1];
            }
            Opcode::Store | Opcode::Istore => {
                let arr = frame.heap_slot(a, &self.heap)?;
                let x = if op == Opcode::Store {
                    frame.f64(c)?
                } else {
                    semantics::frombits(frame.i64(c)?)
                };
                let data = &mut self.heap[arr.heap as usize][arr.range()];
                let i = frame.index(a, frame.i64(b)?, data.len())?;
                data[i] = x;
            }
            Opcode::Slice | Opcode::View => {
                let arr = frame.heap_slot(a, &self.heap)?;
                let (lo, hi) = (frame.i64(b)?, frame.i64(c)?);
                let len = i64::from(arr.len);
                // As the JIT: unsigned comparisons (a negative bound is out
                // of bounds), the end first, then the start.
                let (end_out, start_out) = (hi as u64 > len as u64, lo as u64 > hi as u64);
                let (lo, hi) = match op {
                    // A `view` does not trap: outside the array it is
                    // empty, so that every access through it fails.
                    Opcode::View if end_out || start_out => (0, 0),
                    Opcode::View => (lo, hi),
                    _ if end_out => {
                        let array = func.array_name(a);
                        return Err(trap(func, TrapKind::SliceEndOutOfBounds { array, hi, len }));
                    }
                    _ if start_out => {
                        let array = func.array_name(a);
                        let kind = TrapKind::SliceStartOutOfBounds { array, lo, hi };
                        return Err(trap(func, kind));
                    }
                    _ => (lo, hi),
                };
                let view = View {
                    heap: arr.heap,
                    lo: arr.lo + lo as u32,
                    len: (hi - lo) as u32,
                };
                let slot = match frame.get(a)? {
                    Slot::IArray(_) => Slot::IArray(view),
                    _ => Slot::Array(view),
                };
                frame.set(inst, slot)?;
            }
            op => return Err(bad_format(func, op, "three operands")),
        }
        Ok(())
    }

    /// `zeros len`: a new zero-filled array, in the storage of the one this
    /// instruction made before in this frame if there is one.
    #[inline(always)]
    fn zeros(&mut self, frame: &mut Frame<'m>, inst: Inst, len: Value) -> Result<(), Fault> {
        let func = frame.func;
        let n = frame.i64(len)?;
        let size = usize::try_from(n)
            .ok()
            .filter(|_| n <= self.limits.max_array_len)
            .ok_or_else(|| {
                trap(
                    func,
                    TrapKind::BadArrayLength {
                        len: n,
                        max: self.limits.max_array_len,
                    },
                )
            })?;
        let result = frame.result(inst)?;
        // The array of this instruction's previous execution in
        // this frame is dead (see the crate doc): reuse it.
        let slot = match frame.values.read(result) {
            Slot::Array(v) | Slot::IArray(v)
                if v.heap as usize >= frame.heap_base && (v.heap as usize) < self.heap.len() =>
            {
                let i = v.heap as usize;
                let data = &mut self.heap[i];
                data.clear();
                data.try_reserve_exact(size)
                    .map_err(|_| trap(func, TrapKind::OutOfMemory { len: n }))?;
                data.resize(size, 0.0);
                i
            }
            _ => {
                let mut data = Vec::new();
                if data.try_reserve_exact(size).is_err() || self.heap.try_reserve(1).is_err() {
                    return Err(trap(func, TrapKind::OutOfMemory { len: n }));
                }
                data.resize(size, 0.0);
                self.heap.push(data);
                self.heap.len() - 1
            }
        };
        let view = View::whole(slot, size);
        let slot = match func.dfg.inst(inst).opcode() {
            Opcode::Izeros => Slot::IArray(view),
            _ => Slot::Array(view),
        };
        frame.values.write(result, slot);
        Ok(())
    }

    /// `push arg` onto `tape`.
    #[inline(always)]
    fn push(&mut self, frame: &Frame<'m>, tape: u8, arg: Value) -> Result<(), Fault> {
        let func = frame.func;
        let x = frame.get(arg)?;
        match (x, self.tapes.get_mut(usize::from(tape))) {
            (Slot::Array(_) | Slot::IArray(_), _) => Err(unsupported(func, "`push` of an array")),
            (_, None) => Err(unsupported(func, "a tape that does not exist")),
            (x, Some(t)) => {
                if t.len() == t.capacity() {
                    // The entries of every tape count against the budget.
                    let total: usize = self.tapes.iter().map(Vec::len).sum();
                    let limit = self.limits.tape_entries();
                    let room = limit.saturating_sub(total as u64);
                    if room == 0 {
                        let limit = self.limits.tape_limit;
                        return Err(trap(func, TrapKind::TapeLimitExceeded { limit }));
                    }
                    let t = &mut self.tapes[usize::from(tape)];
                    grow_tape(t, room).map_err(|k| trap(func, k))?;
                    t.push(x);
                    return Ok(());
                }
                t.push(x);
                Ok(())
            }
        }
    }

    /// `return args`: the results go to `scratch`, checked against the
    /// signature.
    #[inline(always)]
    fn ret(&mut self, frame: &Frame<'m>, args: &[Value]) -> Result<Step, Fault> {
        let func = frame.func;
        self.tick(frame.pc + 1, func)?;
        self.scratch.clear();
        for &a in args {
            self.scratch.push(frame.get(a)?);
        }
        // The caller owns an array result: only a whole array of this
        // frame can go (the verifier allows only arrays the function owns,
        // each once).
        for (k, s) in self.scratch.iter().enumerate() {
            if let Slot::Array(v) | Slot::IArray(v) = s {
                let whole = (v.heap as usize) >= frame.heap_base
                    && self
                        .heap
                        .get(v.heap as usize)
                        .is_some_and(|d| v.lo == 0 && d.len() == v.len as usize)
                    && !self.scratch[..k].contains(s);
                if !whole {
                    return Err(unsupported(
                        func,
                        "`return` of an array this function does not own",
                    ));
                }
            }
        }
        let tys = &func.sig.results;
        if tys.len() != self.scratch.len()
            || tys
                .iter()
                .zip(&self.scratch)
                .any(|(&t, s)| s.ty() != Some(t))
        {
            return Err(unsupported(
                func,
                format!(
                    "`return` of {} does not match the signature's results",
                    self.scratch
                        .iter()
                        .map(|s| s.describe())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        Ok(Step::Return)
    }

    /// Transfers control to `dest`, assigning its parameters in parallel.
    #[inline(always)]
    fn branch(&mut self, frame: &mut Frame<'m>, dest: &BlockCall) -> Result<(), Fault> {
        let func = frame.func;
        let block = dest.block;
        if !func.dfg.block_is_valid(block) || !func.layout.is_block_inserted(block) {
            return Err(unsupported(
                func,
                format!("branch to {block}, which is not in the function"),
            ));
        }
        let params = func.dfg.block_params(block);
        if params.len() != dest.args.len() {
            return Err(unsupported(
                func,
                format!(
                    "branch to {block} with {} argument(s), but it has {} parameter(s)",
                    dest.args.len(),
                    params.len()
                ),
            ));
        }
        self.scratch.clear();
        for &a in &dest.args {
            let s = frame.get(a)?;
            if let Slot::Array(_) | Slot::IArray(_) = s {
                return Err(unsupported(
                    func,
                    format!("array {a} cannot be passed as a block argument"),
                ));
            }
            self.scratch.push(s);
        }
        for (&p, &s) in params.iter().zip(&self.scratch) {
            frame.values.write(p, s);
        }
        frame.block = block;
        frame.pc = 0;
        Ok(())
    }
}

/// Makes room on a full tape: doubles it (64 entries at first), or fails
/// with `TapeOutOfMemory` instead of aborting the process as `Vec::push`
/// would.
#[cold]
#[inline(never)]
/// Grows a full tape (amortised doubling), by at most `room` entries (what
/// is left of the budget, at least 1).
fn grow_tape(tape: &mut Vec<Slot>, room: u64) -> Result<(), TrapKind> {
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    let want = tape
        .capacity()
        .saturating_mul(2)
        .max(64)
        .min(tape.len().saturating_add(room));
    tape.try_reserve_exact(want - tape.len())
        .map_err(|_| TrapKind::TapeOutOfMemory {
            entries: tape.len() as u64,
            bytes: want.saturating_mul(std::mem::size_of::<Slot>()) as u64,
        })
}

/// The frames of `depth` nested calls do not fit in memory (a deep
/// recursion of a big function; the JIT runs out of native stack instead).
#[cold]
#[inline(never)]
fn frames_out_of_memory(func: &Function, depth: u64) -> Fault {
    unsupported(
        func,
        format!("out of memory for the frames of {depth} nested calls"),
    )
}

#[cold]
#[inline(never)]
fn bad_format(func: &Function, op: Opcode, what: &str) -> Fault {
    unsupported(func, format!("`{op}` cannot be written with {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_types() {
        assert_eq!(Slot::default(), Slot::Undef);
        assert_eq!(Slot::Undef.ty(), None);
        assert_eq!(Slot::Array(View::whole(0, 0)).ty(), Some(Type::Array));
    }
}
