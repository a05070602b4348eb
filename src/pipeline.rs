//! The pipeline: source → IR → (inliner) → (AD) → (optimizer) → execution.
//!
//! The stages after `parsed` are where the inliner, the AD passes and the
//! optimizer (`adze_opt::optimize_module`, after AD: derivatives are
//! computed on unoptimized IR) plug in. The verifier runs after every stage,
//! in release builds too (it costs a few percent of a compile, see
//! `docs/robustness.md`), and on the functions an engine is about to run:
//! IR that does not verify is an internal error naming the stage, never
//! code handed to Cranelift (whose register allocator panics on it). The
//! optimizer verifies after each of its own passes in debug builds.

use crate::Error;
use adze_ir::{FuncId, Module, Outcome, Val};
pub use adze_jit::OptLevel;
use std::path::Path;

/// Where the inliner runs (SPEC §3). The default is `All`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum InlineSetting {
    // The variants' docs are also the help of `--inline` (clap).
    /// Never inline.
    None,
    /// Inline before AD only (the `inlined` stage).
    Early,
    /// Inline after AD only: the derivative IR, and between nested
    /// derivative requests.
    Late,
    /// Inline both before and after AD.
    #[default]
    All,
}

impl InlineSetting {
    /// Every setting, from the one that inlines least to the one that
    /// inlines most.
    pub const ALL: [InlineSetting; 4] = [
        InlineSetting::None,
        InlineSetting::Early,
        InlineSetting::Late,
        InlineSetting::All,
    ];

    /// Its name on the command line (`--inline none`).
    pub fn name(self) -> &'static str {
        match self {
            InlineSetting::None => "none",
            InlineSetting::Early => "early",
            InlineSetting::Late => "late",
            InlineSetting::All => "all",
        }
    }
}

/// A stage of the pipeline that `adze dump` can print.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Stage {
    /// The module as the front end lowered it.
    Parsed,
    /// After the early inliner (`parsed` unchanged for `--inline none` and
    /// `late`).
    Inlined,
    /// Every `autodiff` request lowered, then the late inliner (for
    /// `--inline late` and `all`).
    Ad,
    /// After the optimizer (`ad` unchanged when the session's `optimize` is
    /// off, `--no-opt`).
    Optimized,
}

impl Stage {
    /// Every stage, in pipeline order.
    pub const ALL: [Stage; 4] = [Stage::Parsed, Stage::Inlined, Stage::Ad, Stage::Optimized];

    /// The stage's name on the command line (`--stage parsed`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Parsed => "parsed",
            Stage::Inlined => "inlined",
            Stage::Ad => "ad",
            Stage::Optimized => "optimized",
        }
    }
}

/// Which executor runs the code.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// Cranelift native code.
    #[default]
    Jit,
    /// The reference interpreter.
    Interp,
}

impl Engine {
    /// Its name on the command line (`--engine jit`).
    pub fn name(self) -> &'static str {
        match self {
            Engine::Jit => "jit",
            Engine::Interp => "interp",
        }
    }
}

/// How the JIT compiles a session's functions: [`Session::jit`], and so
/// every [`crate::Program::function`], [`crate::Program::derivative`] and
/// [`crate::Program::compile`] of a program made from the session. The
/// default is what the command line uses.
///
/// ```
/// use adze::{OptLevel, Program, Session};
/// let mut session = Session::from_source("doc.adz", "fn sq(x: f64) -> f64 { x * x }").unwrap();
/// // Compile fast, without Cranelift's verifier (what the benchmarks do).
/// session.jit.opt_level = OptLevel::None;
/// session.jit.verify = false;
/// let sq = Program::new(session).function("sq").unwrap();
/// assert_eq!(sq.call(&mut [adze::Arg::F64(3.0)]).unwrap(), vec![adze_ir::Val::F64(9.0)]);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct JitSettings {
    /// Cranelift's optimisation level (default [`OptLevel::Auto`]: `speed`
    /// for small functions, `none` for large ones; docs/performance.md).
    pub opt_level: OptLevel,
    /// Run Cranelift's own IR verifier on every function it compiles
    /// (default: in debug builds of adze only; it costs 30–50 % of the
    /// compile time). adze's IR verifier runs either way.
    pub verify: bool,
    /// Keep the machine code's listing, [`crate::Function::disassembly`]
    /// (default off).
    pub disasm: bool,
    /// The most threads one compile uses
    /// ([`adze_jit::JitOptions::compile_threads`]; the code is the same).
    pub compile_threads: usize,
}

impl Default for JitSettings {
    /// The JIT's own defaults ([`adze_jit::JitOptions::default`]).
    fn default() -> JitSettings {
        let d = adze_jit::JitOptions::default();
        JitSettings {
            opt_level: d.opt_level,
            verify: d.verify,
            disasm: d.disasm,
            compile_threads: d.compile_threads,
        }
    }
}

/// A checked program, ready to be transformed and run.
#[derive(Clone, Debug)]
pub struct Session {
    /// The module as lowered by the front end.
    pub module: Module,
    /// Where the inliner runs (default: [`InlineSetting::All`]).
    pub inline: InlineSetting,
    /// Limits of the compiled code and the interpreter: call depth, array
    /// length, and the time a run may take (`limits.timeout`, the
    /// command's `--timeout`).
    pub limits: adze_ir::Limits,
    /// Limits of the AD passes (nesting depth of derivatives).
    pub ad_limits: adze_ad::AdLimits,
    /// Whether a run whose reverse-mode tape outgrows its budget
    /// (`limits.tape_limit`) runs again with every loop checkpointed
    /// (`ad_limits.checkpoint`, the same bits): the default. Off (`adze run
    /// --no-checkpoint-fallback`), such a run stops with the budget's
    /// error. See [`Session::run`] and docs/ad-reverse.md, "The tape
    /// budget".
    pub checkpoint_fallback: bool,
    /// Whether the `optimized` stage runs the optimizer (the default); off,
    /// it is the `ad` stage unchanged.
    pub optimize: bool,
    /// How the JIT compiles (optimisation level, Cranelift's verifier);
    /// the default is [`JitSettings::default`].
    pub jit: JitSettings,
    /// The call graph and `autodiff` requests of the source, for the
    /// warnings about rules that do not cover a mode (`None` for a session
    /// made from a module).
    pub coverage: Option<adze_lang::ModeCoverage>,
    /// A pass run after every run of the inliner on the module (early,
    /// late, and on a derivative made for the command line or the API):
    /// `None` but in tests that inject a fault to see that checks such as
    /// `adze check-inline` find it ([`crate::check_inline`]).
    pub after_inline: Option<fn(&mut Module)>,
}

impl Session {
    /// Reads and checks a `.adz` file.
    pub fn from_file(path: &Path) -> Result<Session, Error> {
        timing_mark("start");
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let (module, coverage) =
            adze_lang::compile_bytes_with_coverage(&path.display().to_string(), &bytes)
                .map_err(Error::Diagnostics)?;
        let mut session = Session::from_module(module)?;
        session.coverage = Some(coverage);
        timing_mark("front-end");
        Ok(session)
    }

    /// Checks `.adz` source text.
    pub fn from_source(file_name: &str, source: &str) -> Result<Session, Error> {
        let (module, coverage) =
            adze_lang::compile_with_coverage(file_name, source).map_err(Error::Diagnostics)?;
        let mut session = Session::from_module(module)?;
        session.coverage = Some(coverage);
        Ok(session)
    }

    /// Warnings about functions whose custom rules do not cover a mode that
    /// the program's `autodiff` requests differentiate them in (their body
    /// is used in that mode, the rule ignored). `None`: nothing to warn
    /// about, or a session made from a module.
    pub fn rule_warnings(&self) -> Option<adze_lang::Diagnostics> {
        self.coverage.as_ref()?.warnings()
    }

    /// The same warnings for the derivative of `name` in `mode` requested
    /// outside the source ([`Session::derive`], `--derive MODE`), without
    /// those of the program's own requests.
    pub fn derive_warnings(
        &self,
        name: &str,
        mode: adze_ir::Mode,
    ) -> Option<adze_lang::Diagnostics> {
        self.coverage.as_ref()?.warnings_for(false, &[(name, mode)])
    }

    /// Wraps a module (verified first).
    pub fn from_module(module: Module) -> Result<Session, Error> {
        verify(&module, "lower")?;
        Ok(Session {
            module,
            inline: InlineSetting::default(),
            limits: adze_ir::Limits::default(),
            ad_limits: adze_ad::AdLimits::default(),
            checkpoint_fallback: true,
            optimize: true,
            jit: JitSettings::default(),
            coverage: None,
            after_inline: None,
        })
    }

    /// The module after every stage, in order, each verified (in every
    /// build): `parsed`; `inlined` (the inliner, for `--inline early` and
    /// `all`); `ad` (every `autodiff` request lowered, then the inliner again
    /// on the derivative IR for `late` and `all`); `optimized` (the
    /// optimizer, `adze_opt::optimize_module`). With a `root`, the `ad`
    /// stage lowers only what `root` reaches.
    pub fn stages(&self, root: Option<&str>) -> Result<Vec<(Stage, Module)>, Error> {
        self.stages_until(root, Stage::Optimized)
    }

    /// [`Session::stages`] up to `last` only: no later stage runs (`adze
    /// dump --stage parsed` runs no inliner, no AD, no optimizer).
    pub fn stages_until(
        &self,
        root: Option<&str>,
        last: Stage,
    ) -> Result<Vec<(Stage, Module)>, Error> {
        let mut out = Vec::with_capacity(Stage::ALL.len());
        self.run_stages(root, last, |stage, module| {
            out.push((stage, module.clone()))
        })?;
        Ok(out)
    }

    /// Applies the stages in order up to `last`, showing `record` the module
    /// after each.
    fn run_stages(
        &self,
        root: Option<&str>,
        last: Stage,
        record: impl FnMut(Stage, &Module) + Send,
    ) -> Result<Module, Error> {
        on_big_stack(|| self.run_stages_here(root, last, record))
    }

    fn run_stages_here(
        &self,
        root: Option<&str>,
        last: Stage,
        record: impl FnMut(Stage, &Module),
    ) -> Result<Module, Error> {
        let promises = AdPromises {
            final_derivatives: self.final_derivatives(root, false),
            next: None,
        };
        self.run_stages_with(root, last, promises, record)
    }

    /// [`Session::run_stages_here`], the AD passes told `promises`.
    fn run_stages_with(
        &self,
        root: Option<&str>,
        last: Stage,
        promises: AdPromises,
        mut record: impl FnMut(Stage, &Module),
    ) -> Result<Module, Error> {
        let mut module = self.module.clone();
        for stage in Stage::ALL {
            match stage {
                Stage::Parsed => {}
                Stage::Optimized => {
                    if self.optimize {
                        let ids = scope(&module, root);
                        optimize_functions(&mut module, &ids)?;
                    }
                }
                Stage::Inlined => {
                    if matches!(self.inline, InlineSetting::Early | InlineSetting::All) {
                        let ids = scope(&module, root);
                        self.inline(&mut module, &ids, "inline (early)")?;
                    }
                }
                Stage::Ad => {
                    module = self.lowered(module, root, promises)?;
                    if matches!(self.inline, InlineSetting::Late | InlineSetting::All) {
                        let ids = scope(&module, root);
                        self.inline(&mut module, &ids, "inline (late)")?;
                    }
                }
            }
            timing_mark(stage.name());
            record(stage, &module);
            if stage == last {
                break;
            }
        }
        Ok(module)
    }

    fn lowered(
        &self,
        mut module: Module,
        root: Option<&str>,
        promises: AdPromises,
    ) -> Result<Module, Error> {
        self.with_ad_context(promises, |cx| -> Result<(), Error> {
            match root {
                Some(name) => {
                    let id = function_by_name(&module, name)?;
                    cx.lower_autodiff_from(&mut module, id)?;
                }
                None => cx.lower_autodiff(&mut module)?,
            }
            Ok(())
        })?;
        verify(&module, "ad")?;
        Ok(module)
    }

    /// Runs `f` with the AD context of this session: its AD limits and, for
    /// `--inline late` and `all`, the inliner as the pass between nested
    /// lowerings (on the derivatives an inner request created, before an
    /// outer pass differentiates the code that calls them).
    fn with_ad_context<R>(
        &self,
        promises: AdPromises,
        f: impl FnOnce(&mut adze_ad::AdContext<'_>) -> R,
    ) -> R {
        let mut late_inliner = |m: &mut Module, created: &[FuncId]| {
            adze_opt::inline_functions(m, created, &adze_opt::DefaultPolicy::default());
        };
        let mut cx = adze_ad::AdContext::new(self.ad_limits);
        if promises.final_derivatives {
            cx = cx.with_final_derivatives();
        }
        if let Some(mode) = promises.next {
            cx = cx.under_derivative(mode);
        }
        if matches!(self.inline, InlineSetting::Late | InlineSetting::All) {
            cx = cx.with_between(&mut late_inliner);
        }
        f(&mut cx)
    }

    /// Whether the derivatives built for `root` (the whole module without
    /// one) are final: no reverse derivative is taken of them, neither by
    /// a request in what `root` reaches nor, with `reverse_root`, by a
    /// reverse derivative of `root` itself
    /// ([`adze_ad::reverse_over_derivatives`], on the source module, so
    /// that every inline setting decides alike).
    fn final_derivatives(&self, root: Option<&str>, reverse_root: bool) -> bool {
        let roots: Vec<FuncId> = match root {
            Some(name) => self.module.get(name).into_iter().collect(),
            None => self.module.ids().collect(),
        };
        let reverse_roots: &[FuncId] = if reverse_root { &roots } else { &[] };
        !adze_ad::reverse_over_derivatives(&self.module, &roots, reverse_roots)
    }

    /// The inliner on the functions `ids` (then [`Session::after_inline`]).
    fn inline(&self, module: &mut Module, ids: &[FuncId], pass: &str) -> Result<(), Error> {
        adze_opt::inline_functions(module, ids, &adze_opt::DefaultPolicy::default());
        if let Some(hook) = self.after_inline {
            hook(module);
        }
        verify(module, pass)
    }

    /// The module that runs `name`: every stage applied to what it reaches.
    pub fn prepare(&self, name: &str) -> Result<Module, Error> {
        self.run_stages(Some(name), Stage::Optimized, |_, _| {})
    }

    /// Adds to the prepared module of `name` the derivative that the command
    /// line and the Rust API request without writing `autodiff` in source:
    /// every f64 parameter `dual` (forward) or `active` (reverse), every
    /// array `dup`, everything else and the parameters named in `consts`
    /// `const`; the results, when they are all f64, `dual` (forward) or
    /// `active` (reverse: each seeded with 1.0), else `const`. Returns the
    /// module, optimized (unless [`Session::optimize`] is off), and the
    /// derivative's name.
    pub fn derive(
        &self,
        name: &str,
        mode: adze_ir::Mode,
        width: usize,
        consts: &[String],
    ) -> Result<(Module, String), Error> {
        let (mut module, derived) = self.derive_unoptimized(name, mode, width, consts)?;
        if self.optimize {
            let ids = scope(&module, Some(&derived));
            optimize_functions(&mut module, &ids)?;
            timing_mark("optimized (derivative)");
        }
        Ok((module, derived))
    }

    /// [`Session::derive`] without the optimizer: the module of the `ad`
    /// stage with the derivative added (the derivative is computed on
    /// unoptimized IR either way).
    pub fn derive_unoptimized(
        &self,
        name: &str,
        mode: adze_ir::Mode,
        width: usize,
        consts: &[String],
    ) -> Result<(Module, String), Error> {
        on_big_stack(|| self.derive_here(name, mode, width, consts))
    }

    fn derive_here(
        &self,
        name: &str,
        mode: adze_ir::Mode,
        width: usize,
        consts: &[String],
    ) -> Result<(Module, String), Error> {
        use adze_ir::{Mode, RetActivity, Type};
        let (mut module, sig, args, final_derivatives) =
            self.derive_request(name, mode, width, consts)?;
        // The results, when they are all f64 or f64 arrays: `dual`, or in
        // reverse mode `active` when they are all f64 (each cotangent
        // seeded with 1.0; for a tuple: the gradient of the sum of its
        // parts) and `dup` with an array among them (the derivative takes
        // one cotangent per result after its parameters).
        let diff = !sig.results.is_empty()
            && sig
                .results
                .iter()
                .all(|&t| matches!(t, Type::F64 | Type::Array));
        let arrays = sig.results.contains(&Type::Array);
        let ret = match (mode, diff) {
            (_, false) => RetActivity::Const,
            (Mode::Forward, true) => RetActivity::Dual,
            (Mode::Reverse, true) if arrays => RetActivity::Dup,
            (Mode::Reverse, true) => RetActivity::Active,
        };
        let derived = self.with_ad_context(
            AdPromises::derivative(final_derivatives),
            |cx| -> Result<FuncId, Error> {
                Ok(match mode {
                    Mode::Forward => cx.derive_forward(&mut module, name, &args, ret, width)?,
                    Mode::Reverse => cx.derive_reverse(&mut module, name, &args, ret)?,
                })
            },
        )?;
        let derived_name = self.finish_derivative(&mut module, derived)?;
        Ok((module, derived_name))
    }

    /// The module of the `ad` stage of `name`, its signature, and the
    /// activities of a derivative requested from outside: every f64
    /// parameter `dual` (forward) or `active` (reverse), every array `dup`,
    /// everything else and the parameters named in `consts` `const`.
    fn derive_request(
        &self,
        name: &str,
        mode: adze_ir::Mode,
        width: usize,
        consts: &[String],
    ) -> Result<(Module, adze_ir::Signature, Vec<adze_ir::ArgActivity>, bool), Error> {
        use adze_ir::{ArgActivity, Mode, Type};
        let final_derivatives = self.final_derivatives(Some(name), mode == Mode::Reverse);
        if mode == Mode::Reverse && width != 1 {
            return Err(Error::Argument(
                "vector mode (`--width`) is for forward derivatives".to_string(),
            ));
        }
        // What the derivative differentiates is lowered as its pass lowers
        // the requests inside its primal itself: under a reverse one
        // taped, `#[checkpoint]` hints included (reverse mode over a
        // checkpointed loop is not exact; see docs/ad-reverse.md,
        // "Checkpointing"); under a forward one checkpointed for forward
        // mode (`.ckptf`). The derivative itself is checkpointed as asked.
        let promises = AdPromises {
            final_derivatives,
            next: Some(mode),
        };
        let module = self.run_stages_with(Some(name), Stage::Ad, promises, |_, _| {})?;
        let id = function_by_name(&module, name)?;
        let sig = module.func(id).sig.clone();
        if let Some(c) = consts
            .iter()
            .find(|c| !sig.params.iter().any(|p| &p.name == *c))
        {
            return Err(Error::Argument(format!("`{name}` has no parameter `{c}`")));
        }
        let args: Vec<ArgActivity> = sig
            .params
            .iter()
            .map(|p| match p.ty {
                _ if consts.contains(&p.name) => ArgActivity::Const,
                Type::F64 if mode == Mode::Forward => ArgActivity::Dual,
                Type::F64 => ArgActivity::Active,
                Type::Array => ArgActivity::Dup,
                _ => ArgActivity::Const,
            })
            .collect();
        Ok((module, sig, args, final_derivatives))
    }

    /// Verifies a derivative just added to `module`, runs the late inliner
    /// on it (for `--inline late` and `all`); its name.
    fn finish_derivative(&self, module: &mut Module, derived: FuncId) -> Result<String, Error> {
        verify(module, "ad")?;
        if matches!(self.inline, InlineSetting::Late | InlineSetting::All) {
            let ids = module.reachable_from(derived);
            self.inline(module, &ids, "inline (late)")?;
        }
        timing_mark("derive");
        Ok(module.func(derived).name.clone())
    }

    /// The derivative of `name` that `adze run --derive` runs, with what
    /// each of its parameters and results is ([`Derivative`]). The
    /// activities are those of [`Session::derive`]. Forward mode makes the
    /// same function as [`Session::derive`]; reverse mode makes
    /// `name.vjp.<acts>` ([`adze_ad::vjp_derivative`]), which returns the
    /// primal results before the adjoints and takes the cotangent of each
    /// f64 result as a parameter (the seeds). A request with nothing to
    /// differentiate (no parameter that is not `const`, or nothing whose
    /// derivative is taken: no f64 result, in forward mode results not all
    /// f64, and no `mut` array that is not `const`) is an error. Optimized
    /// as [`Session::derive`] is, when `optimized` is true.
    pub fn derivative(
        &self,
        name: &str,
        mode: adze_ir::Mode,
        width: usize,
        consts: &[String],
        optimized: bool,
    ) -> Result<Derivative, Error> {
        let mut d = on_big_stack(|| self.derivative_here(name, mode, width, consts))?;
        if optimized && self.optimize {
            let ids = scope(&d.module, Some(&d.name));
            optimize_functions(&mut d.module, &ids)?;
            timing_mark("optimized (derivative)");
        }
        Ok(d)
    }

    fn derivative_here(
        &self,
        name: &str,
        mode: adze_ir::Mode,
        width: usize,
        consts: &[String],
    ) -> Result<Derivative, Error> {
        use adze_ir::{ArgActivity, Mode, RetActivity, Type};
        let (mut module, sig, args, final_derivatives) =
            self.derive_request(name, mode, width, consts)?;
        // The results with a tangent and a cotangent: f64 and f64 arrays.
        let diff_results = sig
            .results
            .iter()
            .filter(|&&t| matches!(t, Type::F64 | Type::Array))
            .count();
        let ret = match mode {
            Mode::Forward if diff_results > 0 && diff_results == sig.results.len() => {
                RetActivity::Dual
            }
            Mode::Reverse if diff_results > 0 => RetActivity::Active,
            _ => RetActivity::Const,
        };
        nothing_to_differentiate(name, mode, &sig, &args, ret)?;
        let mut roles = Vec::new();
        for (k, a) in args.iter().enumerate() {
            roles.push(Role::Primal(k));
            let lanes = match (mode, a) {
                (Mode::Forward, ArgActivity::Dual) => Role::Tangent(k),
                (_, ArgActivity::Dup) => Role::Shadow(k),
                _ => continue,
            };
            let width = if mode == Mode::Forward { width } else { 1 };
            roles.extend(std::iter::repeat_n(lanes, width));
        }
        let derived = self.with_ad_context(
            AdPromises::derivative(final_derivatives),
            |cx| -> Result<FuncId, Error> {
                Ok(match mode {
                    Mode::Forward => cx.derive_forward(&mut module, name, &args, ret, width)?,
                    Mode::Reverse => {
                        let func = function_by_name(&module, name)?;
                        let request = adze_ad::ReverseRequest::new(func, args.clone(), ret);
                        cx.vjp_derivative(&mut module, &request)?
                    }
                })
            },
        )?;
        let adjoints = match mode {
            Mode::Forward => Vec::new(),
            Mode::Reverse => {
                if ret == RetActivity::Active {
                    roles.extend((0..diff_results).map(Role::Seed));
                }
                (0..args.len())
                    .filter(|&k| args[k] == ArgActivity::Active)
                    .collect()
            }
        };
        let params = module.func(derived).sig.params.len();
        if params != roles.len() {
            return Err(Error::Verify(format!(
                "the derivative of `{name}` has {params} parameters, not the {} expected",
                roles.len()
            )));
        }
        let derived_name = self.finish_derivative(&mut module, derived)?;
        Ok(Derivative {
            module,
            name: derived_name,
            mode,
            roles,
            primal_results: sig.results.len(),
            adjoints,
        })
    }

    /// Looks a function up by name, with a helpful error.
    pub fn function(&self, name: &str) -> Result<FuncId, Error> {
        function_by_name(&self.module, name)
    }

    /// Runs `name` on `args` through the chosen engine. A run whose
    /// reverse-mode tape outgrows its budget runs again, from the same
    /// arguments, with every loop checkpointed
    /// ([`Session::checkpoint_fallback`]): checkpointed derivatives are
    /// the taped ones bit for bit, so only time and memory tell.
    pub fn run(&self, name: &str, args: &[Val], engine: Engine) -> Result<Outcome, Error> {
        let module = self.prepare(name)?;
        match self.run_in(&module, name, args, engine) {
            Err(e) if self.falls_back(&e) => {
                // The budget's error stands if the checkpointed build fails.
                let again = self.checkpointed();
                match again.prepare(name) {
                    Ok(module) => again.run_in(&module, name, args, engine),
                    Err(_) => Err(e),
                }
            }
            out => out,
        }
    }

    /// Does a run that failed with `e` run again checkpointed: the tape
    /// outgrew its budget, the fallback is on, and the loops were not
    /// checkpointed already?
    pub fn falls_back(&self, e: &Error) -> bool {
        self.may_fall_back() && e.is_tape_budget()
    }

    /// Would a run past the budget run again checkpointed: the fallback is
    /// on and the loops are not checkpointed already?
    pub fn may_fall_back(&self) -> bool {
        self.checkpoint_fallback && !self.ad_limits.checkpoint
    }

    /// This session with every loop checkpointed (`--checkpoint`).
    pub fn checkpointed(&self) -> Session {
        let mut s = self.clone();
        s.ad_limits.checkpoint = true;
        s
    }

    /// Compiles function `id` of `module` (and what it calls) with this
    /// session's limits and JIT settings ([`Session::jit`](Session#structfield.jit)).
    pub fn jit(&self, module: &Module, id: FuncId) -> Result<adze_jit::Compiled, Error> {
        let options = adze_jit::JitOptions {
            limits: self.limits,
            opt_level: self.jit.opt_level,
            verify: self.jit.verify,
            disasm: self.jit.disasm,
            compile_threads: self.jit.compile_threads,
            ..adze_jit::JitOptions::default()
        };
        Ok(adze_jit::compile(module, id, &options)?)
    }

    /// Runs `name` of `module` (a stage of this session, or a module with a
    /// derivative added by [`Session::derive`]).
    pub fn run_in(
        &self,
        module: &Module,
        name: &str,
        args: &[Val],
        engine: Engine,
    ) -> Result<Outcome, Error> {
        let id = function_by_name(module, name)?;
        verify_reachable(module, id)?;
        match engine {
            Engine::Interp => {
                let out = adze_interp::Interpreter::with_limits(module, self.limits).call(id, args);
                timing_mark("run (interpreter)");
                Ok(out.map_err(|e| e.describe_in(module))?)
            }
            Engine::Jit => {
                let compiled = self.jit(module, id)?;
                timing_mark("jit");
                let out = compiled.call(args);
                timing_mark("run");
                Ok(out.map_err(|e| e.describe_in(module))?)
            }
        }
    }
}

/// What a parameter of a [`Derivative`] is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Parameter number `k` of the function differentiated.
    Primal(usize),
    /// A tangent of the f64 parameter number `k` (forward mode; one per
    /// lane in vector mode).
    Tangent(usize),
    /// The shadow of the array parameter number `k`: its tangent (forward
    /// mode, one per lane) or its adjoint (reverse mode).
    Shadow(usize),
    /// The cotangent of the result number `j` (counting the f64 and array
    /// results only) that reverse mode propagates: the seed (an f64, or an
    /// array of the result's length).
    Seed(usize),
}

/// A derivative requested from outside the source ([`Session::derivative`]):
/// the module that holds it, its name, and what its parameters and results
/// are.
#[derive(Clone, Debug)]
pub struct Derivative {
    /// The module, with the derivative added.
    pub module: Module,
    /// The derivative's name in `module`.
    pub name: String,
    /// Forward or reverse.
    pub mode: adze_ir::Mode,
    /// What each parameter of the derivative is, in order.
    pub roles: Vec<Role>,
    /// How many results the function differentiated has: forward mode
    /// returns them, then their tangents (when they are all f64; nothing
    /// otherwise); reverse mode returns them, then the adjoints.
    pub primal_results: usize,
    /// Reverse mode: the parameters (by number) whose adjoints follow the
    /// primal results, in order.
    pub adjoints: Vec<usize>,
}

/// What the AD passes are told of the derivatives a lowering builds.
#[derive(Copy, Clone, Debug)]
struct AdPromises {
    /// No reverse derivative is taken of them ([`Session::final_derivatives`]).
    final_derivatives: bool,
    /// What is lowered is the primal of a derivative in this mode built
    /// next ([`adze_ad::AdContext::under_derivative`]).
    next: Option<adze_ir::Mode>,
}

impl AdPromises {
    /// For building a derivative itself (nothing differentiates it next).
    fn derivative(final_derivatives: bool) -> AdPromises {
        AdPromises {
            final_derivatives,
            next: None,
        }
    }
}

/// The error for a derivative with nothing to differentiate (see
/// [`Session::derivative`]).
fn nothing_to_differentiate(
    name: &str,
    mode: adze_ir::Mode,
    sig: &adze_ir::Signature,
    args: &[adze_ir::ArgActivity],
    ret: adze_ir::RetActivity,
) -> Result<(), Error> {
    use adze_ir::{ArgActivity, Mode, RetActivity};
    let mode_name = match mode {
        Mode::Forward => "forward",
        Mode::Reverse => "reverse",
    };
    let why = if args.iter().all(|&a| a == ArgActivity::Const) {
        "no parameter is f64 or an array, or every one is `--const`".to_string()
    } else if ret == RetActivity::Const
        && !sig
            .params
            .iter()
            .zip(args)
            .any(|(p, &a)| p.mutable && a == ArgActivity::Dup)
    {
        let results = if sig
            .results
            .iter()
            .any(|t| matches!(t, adze_ir::Type::F64 | adze_ir::Type::Array))
        {
            // Forward mode takes tangents of results that are all f64 or
            // f64 arrays.
            "its results are not all f64 or [f64]"
        } else {
            "it returns no f64 or [f64]"
        };
        format!("{results} and it writes no `mut` array that is not `--const`")
    } else {
        return Ok(());
    };
    Err(Error::Argument(format!(
        "`--derive {mode_name}` of `{name}`: nothing to differentiate: {why}"
    )))
}

/// With `ADZE_TIMINGS` set in the environment, prints to stderr, for each
/// stage as it ends, its wall time since the previous mark and the
/// process's peak memory so far (`VmHWM`): one line `adze-timing STAGE MS
/// PEAK_KB`. Read by the scaling benchmark (`benches/scaling.py`); costs
/// nothing otherwise.
pub fn timing_mark(stage: &str) {
    use std::sync::Mutex;
    use std::time::Instant;
    static LAST: Mutex<Option<Instant>> = Mutex::new(None);
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*ON.get_or_init(|| std::env::var_os("ADZE_TIMINGS").is_some()) {
        return;
    }
    let now = Instant::now();
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let ms = last.map_or(0.0, |t| now.duration_since(t).as_secs_f64() * 1e3);
    *last = Some(now);
    let hwm = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .unwrap_or_else(|| "0".into());
    eprintln!("adze-timing {stage} {ms:.2} {hwm}");
}

/// The stack the compiler's passes run on. Some of them recurse along the
/// program's call chains (the AD passes build a callee's derivative inside
/// its caller's), so a chain of thousands of functions needs more than a
/// main thread's 8 MiB; reserving address space costs nothing until it is
/// touched. About 4 KiB per level of calls: 256 MiB is some 60 000 levels.
const COMPILER_STACK: usize = 256 << 20;

/// Runs `f` on a thread with [`COMPILER_STACK`] bytes of stack (on this
/// thread if no such thread can be made, e.g. under a tight address-space
/// limit).
fn on_big_stack<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let mut f = Some(f);
    let spawned = std::thread::scope(|scope| {
        let run = &mut f;
        std::thread::Builder::new()
            .name("adze-compile".into())
            .stack_size(COMPILER_STACK)
            .spawn_scoped(scope, move || run.take().map(|f| f()))
            .ok()
            .map(|h| h.join())
    });
    match spawned {
        Some(Ok(Some(r))) => r,
        Some(Err(panic)) => std::panic::resume_unwind(panic),
        _ => (f.take().expect("not run"))(),
    }
}

/// The functions a stage transforms: what `root` reaches (calls, rules,
/// regions, requests), or every function without a root. A program of a
/// thousand functions run from one of them transforms only that one's.
fn scope(module: &Module, root: Option<&str>) -> Vec<FuncId> {
    match root.and_then(|name| module.get(name)) {
        Some(id) => module.reachable_from(id),
        None => module.ids().collect(),
    }
}

/// Runs the optimizer on the functions `ids`.
fn optimize_functions(module: &mut Module, ids: &[FuncId]) -> Result<(), Error> {
    adze_opt::optimize_functions(module, ids).map_err(|e| Error::Verify(e.to_string()))?;
    Ok(())
}

/// Runs the optimizer on every function; in debug builds it verifies after
/// each of its passes, and an error names the pass; in every build the
/// result is verified.
pub fn optimize(module: &mut Module) -> Result<(), Error> {
    adze_opt::optimize_module(module).map_err(|e| Error::Verify(e.to_string()))?;
    verify(module, "optimize")
}

/// The text `adze dump` prints for one stage: a line `; stage: NAME` (with
/// a note on the `optimized` stage when the optimizer is off, `optimized`
/// false), then function `func` of `module`, or the whole module without
/// The `; stage: NAME` line a dump starts with.
fn stage_header(stage: Stage, optimized: bool) -> String {
    let note = if stage == Stage::Optimized && !optimized {
        " (--no-opt: identical to `ad`)"
    } else {
        ""
    };
    format!("; stage: {}{note}\n", stage.name())
}

/// one. The command and the Python package's `Program.dump` print this.
pub fn dump_stage(
    module: &Module,
    stage: Stage,
    func: Option<&str>,
    optimized: bool,
) -> Result<String, Error> {
    let mut out = stage_header(stage, optimized);
    match func {
        Some(name) => {
            let id = function_by_name(module, name)?;
            out += &module.display_function(id).to_string();
        }
        None => out += &module.to_string(),
    }
    Ok(out)
}

/// [`dump_stage`] with the notes of `what` as comments
/// ([`adze_ad::annotate`]): `func` and every function it reaches, or the
/// whole module. The text parses back to the same IR.
pub fn dump_stage_annotated(
    module: &Module,
    stage: Stage,
    func: Option<&str>,
    optimized: bool,
    what: adze_ad::annotate::Annotate,
) -> Result<String, Error> {
    let mut out = stage_header(stage, optimized);
    let ids: Vec<FuncId> = match func {
        Some(name) => {
            // What `name` reaches, then the functions those are derived
            // from (whose activity the notes give).
            let mut ids = vec![function_by_name(module, name)?];
            let mut k = 0;
            while k < ids.len() {
                let f = module.func(ids[k]);
                let more = module
                    .derivation(ids[k])
                    .and_then(|d| d.from)
                    .into_iter()
                    .chain(f.referenced_functions())
                    .chain(f.regions.values().flat_map(|r| {
                        std::iter::once(r.callee).chain(r.rules.iter().map(|(_, id)| id))
                    }));
                for id in more.collect::<Vec<_>>() {
                    if module.is_valid(id) && !ids.contains(&id) {
                        ids.push(id);
                    }
                }
                k += 1;
            }
            ids
        }
        None => module.ids().collect(),
    };
    for (k, id) in ids.into_iter().enumerate() {
        if k > 0 {
            out.push('\n');
        }
        let notes = adze_ad::annotate::notes(module, id, what);
        adze_ir::write::write_function_noted(&mut out, module.func(id), Some(module), Some(&notes))
            .map_err(|e| Error::Verify(e.to_string()))?;
    }
    Ok(out)
}

/// Finds a user-visible function by name.
pub fn function_by_name(module: &Module, name: &str) -> Result<FuncId, Error> {
    module.get(name).ok_or_else(|| Error::UnknownFunction {
        name: name.to_string(),
        available: module
            .iter()
            .map(|(_, f)| f.name.as_str())
            .filter(|n| !n.contains('.'))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// Runs the verifier on the whole module (in every build); the error names
/// the pass or stage that produced it.
pub fn verify(module: &Module, pass: &str) -> Result<(), Error> {
    adze_ir::verify::verify_module(module)
        .map_err(|e| Error::Verify(format!("after pass `{pass}`: {e}")))
}

/// Verifies the functions an engine runs when it runs `root`, so that IR
/// that does not verify (a module built or changed by hand, or a pass's
/// bug) is an error before it reaches Cranelift or the interpreter.
pub fn verify_reachable(module: &Module, root: FuncId) -> Result<(), Error> {
    for id in module.reachable_from(root) {
        adze_ir::verify::verify_function(module, id).map_err(|e| {
            Error::Verify(format!(
                "the IR to be run does not verify (function `{}`): {e}",
                module.func(id).name
            ))
        })?;
    }
    Ok(())
}
