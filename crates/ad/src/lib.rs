//! Automatic differentiation passes on adze IR.
//!
//! Forward mode (tangents, including vector mode) is here; the reverse pass
//! will reuse [`partials`], the one table of local derivatives.
//!
//! - [`partials`]: for every differentiable opcode, its partial derivatives,
//!   emitted as IR; every choice at a non-differentiable point.
//! - [`activity`]: which values carry a tangent.
//! - [`forward`]: the tangent transformation, IR to IR
//!   ([`forward_derivative`], [`ForwardRequest`]).
//! - [`lower`]: `autodiff forward` instructions become calls
//!   ([`lower_autodiff`]).
//! - [`context`]: [`AdContext`], the state of the passes (limits, the pass
//!   run between nested lowerings, the size budget, the analyses' caches),
//!   passed down explicitly; the free entry points use a default one.
//!
//! How it all works, with a real dump, is in `docs/ad.md`.
//!
//! ```
//! use adze_ad::derive_forward;
//! use adze_interp::Interpreter;
//! use adze_ir::{ArgActivity, RetActivity, Val};
//!
//! let src = "fn f(x: f64, y: f64) -> f64 { sin(x) * y }";
//! let mut module = adze_lang::compile("f.adz", src).unwrap();
//!
//! // ∂f/∂x along the tangent ẋ = 1, with y constant.
//! let df = derive_forward(
//!     &mut module,
//!     "f",
//!     &[ArgActivity::Dual, ArgActivity::Const],
//!     RetActivity::Dual,
//!     1,
//! )
//! .unwrap();
//! assert_eq!(module.func(df).name, "f.fwd.dual_const");
//! // Arguments: x, ẋ, y. Results: f, ḟ.
//! let out = Interpreter::new(&module)
//!     .call(df, &[Val::F64(0.5), Val::F64(1.0), Val::F64(3.0)])
//!     .unwrap();
//! assert_eq!(
//!     out.results,
//!     vec![Val::F64(0.5f64.sin() * 3.0), Val::F64(0.5f64.cos() * 1.0 * 3.0)]
//! );
//! ```
#![forbid(unsafe_code)]

pub mod activity;
pub mod annotate;
pub mod context;
pub mod forward;
pub mod lower;
pub mod partials;
mod regions;
pub mod reverse;
pub mod rules;

pub use context::{AdContext, BetweenHook};
pub use forward::{forward_derivative, ForwardRequest};
pub use lower::{lower_autodiff, lower_autodiff_from, reverse_over_derivatives};
pub use partials::{Local, Partial};
pub use reverse::{
    derive_reverse, lower_reverse_autodiff, reverse_derivative, split_derivative, vjp_derivative,
    ReverseRequest,
};

use adze_ir::{ArgActivity, FuncId, Module, RetActivity};

/// Why a derivative could not be built. Verifier-clean IR never makes a pass
/// panic: every failure is one of these.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AdError {
    #[error("there is no function `{0}` in the module")]
    NoSuchFunction(String),
    #[error("cannot differentiate `{func}`: it is a declaration without a body")]
    NoBody { func: String },
    #[error("bad derivative request for `{func}`: {reason}")]
    BadRequest { func: String, reason: String },
    #[error("cannot differentiate `{func}`: forward mode does not support {what}")]
    Unsupported { func: String, what: String },
    #[error("the derivative's name `{name}` is taken by a function of another signature")]
    NameTaken { name: String },
    #[error("the {mode} rule `{rule}` of `{func}` has the signature {found}, expected {expected}")]
    RuleSignature {
        mode: adze_ir::Mode,
        func: String,
        rule: String,
        expected: String,
        found: String,
    },
    #[error("derivatives of `{func}` nest more than {limit} deep")]
    TooDeep { func: String, limit: usize },
    /// The code the AD passes created while lowering one request (or one
    /// module) outgrew [`AdLimits::max_size`]: typically derivatives nested
    /// so deeply that the code doubles at every level.
    #[error(
        "the derivative code built for `{func}` exceeds {limit} IR instructions and values \
         (`--max-ad-size`); reduce the nesting of derivatives or raise the limit"
    )]
    TooLarge { func: String, limit: usize },
    #[error("cannot differentiate `{func}`: reverse mode does not support {what}")]
    ReverseUnsupported { func: String, what: String },
    #[error("internal error in reverse mode on `{func}`: {reason}")]
    ReverseInternal { func: String, reason: String },
}

/// The forward derivative of the function called `name`, for one activity
/// per parameter (`Const`, `Dual` for f64, `Dup` for arrays), the result's
/// activity (`Dual` or `Const`) and a vector width (1 for one tangent per
/// input). The derivative's signature is described in [`forward`]; it is
/// created once per distinct request. (With the default [`AdContext`]: see
/// [`AdContext::derive_forward`].)
pub fn derive_forward(
    module: &mut Module,
    name: &str,
    args: &[ArgActivity],
    ret: RetActivity,
    width: usize,
) -> Result<FuncId, AdError> {
    AdContext::default().derive_forward(module, name, args, ret, width)
}

/// Checks one activity per parameter of `sig` for a request of `mode`:
/// `const` anywhere; f64 parameters `dual` (forward) or `active` (reverse);
/// arrays `dup`. The error says which parameter cannot take which activity.
pub(crate) fn check_activities(
    sig: &adze_ir::Signature,
    args: &[ArgActivity],
    mode: adze_ir::Mode,
) -> Result<(), String> {
    use adze_ir::{Mode, Type};
    if args.len() != sig.params.len() {
        return Err(format!(
            "{} activities for {} parameters",
            args.len(),
            sig.params.len()
        ));
    }
    for (p, a) in sig.params.iter().zip(args) {
        let ok = match (a, mode) {
            (ArgActivity::Const, _) => true,
            (ArgActivity::Dual, Mode::Forward) | (ArgActivity::Active, Mode::Reverse) => {
                p.ty == Type::F64
            }
            (ArgActivity::Dup, _) => p.ty == Type::Array,
            _ => false,
        };
        if !ok {
            return Err(format!(
                "parameter `{}: {}` cannot be `{}` in {} mode",
                p.name,
                p.ty,
                a.name(),
                mode.name()
            ));
        }
    }
    Ok(())
}

/// Limits of the AD passes, held by an [`AdContext`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdLimits {
    /// How deeply derivative requests may nest while one is being built
    /// (a derivative of a derivative of ..); beyond it, [`AdError::TooDeep`].
    pub max_nesting: usize,
    /// How large the code created by one lowering may grow, counted as
    /// instructions plus values (results and parameters) of every function
    /// the AD passes create; beyond it, [`AdError::TooLarge`]. See
    /// [`context`] for what one lowering is.
    pub max_size: usize,
    /// Checkpoint the tape of reverse derivatives' outermost counted loops
    /// (docs/ad-reverse.md, "Checkpointing"): the same derivatives, bit
    /// for bit, in memory bounded by the run's segment length
    /// ([`adze_ir::Limits::segment_entries`]).
    pub checkpoint: bool,
}

/// The default of [`AdLimits::max_size`]: far above anything a real
/// derivative needs (the largest in the examples and benchmarks, a vector
/// forward derivative of GMM's Hessian-vector product, creates about
/// 12 000; every `autodiff` of the GMM benchmark together about 7 000),
/// large enough for the reverse derivative of one function of 100 000
/// straight-line statements (about 36 per statement: 30 000 need 1.1
/// million), and reached in a few seconds (debug build) by code that
/// doubles with every level of nesting: 20 nested forward derivatives of
/// `x³`. It was 1 000 000 until session 7 (issue #14: 30 000 statements
/// did not fit).
pub const MAX_SIZE: usize = 4_000_000;

impl AdLimits {
    const DEFAULT: AdLimits = AdLimits {
        max_nesting: forward::MAX_NESTING,
        max_size: MAX_SIZE,
        checkpoint: false,
    };
}

impl Default for AdLimits {
    fn default() -> AdLimits {
        AdLimits::DEFAULT
    }
}
