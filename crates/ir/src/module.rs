//! A module: the functions of one program, in a deterministic order.

use crate::entities::FuncId;
use crate::function::{Function, Signature};
use crate::instructions::{ArgActivity, AutodiffSpec, Mode, RetActivity};
use crate::types::Type;
use cranelift_entity::PrimaryMap;
use indexmap::IndexMap;

/// Functions by id, and an index from name to id. Iteration order is creation
/// order, which is deterministic: the front end creates functions in source
/// order, passes append the functions they derive.
#[derive(Clone, Debug, Default)]
pub struct Module {
    funcs: PrimaryMap<FuncId, Function>,
    names: IndexMap<String, FuncId>,
    /// The source file the instructions' locations refer to (one per
    /// module; see [`crate::srcloc`]). Printed as `source "FILE"` first.
    pub source_file: Option<String>,
}

impl Module {
    pub fn new() -> Module {
        Module::default()
    }

    /// Declares a function with no body. Fails if the name is taken.
    pub fn declare(&mut self, name: &str, sig: Signature) -> Result<FuncId, String> {
        if self.names.contains_key(name) {
            return Err(format!("function @{name} is defined twice"));
        }
        let id = self.funcs.push(Function::new(name, sig));
        self.names.insert(name.to_string(), id);
        Ok(id)
    }

    /// Adds a complete function. Fails if the name is taken.
    pub fn push(&mut self, func: Function) -> Result<FuncId, String> {
        if self.names.contains_key(&func.name) {
            return Err(format!("function @{} is defined twice", func.name));
        }
        let name = func.name.clone();
        let id = self.funcs.push(func);
        self.names.insert(name, id);
        Ok(id)
    }

    /// The location `loc` of this module's source file, for a run-time
    /// error (`None` when `loc` is none).
    pub fn location(&self, loc: crate::SourceLoc) -> Option<crate::Location> {
        crate::Location::new(self.source_file.as_deref(), loc)
    }

    pub fn get(&self, name: &str) -> Option<FuncId> {
        self.names.get(name).copied()
    }

    pub fn func(&self, id: FuncId) -> &Function {
        &self.funcs[id]
    }

    pub fn func_mut(&mut self, id: FuncId) -> &mut Function {
        &mut self.funcs[id]
    }

    pub fn is_valid(&self, id: FuncId) -> bool {
        self.funcs.is_valid(id)
    }

    pub fn len(&self) -> usize {
        self.funcs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.funcs.is_empty()
    }

    /// Functions in creation order.
    pub fn iter(&self) -> impl Iterator<Item = (FuncId, &Function)> {
        self.funcs.iter()
    }

    pub fn ids(&self) -> impl Iterator<Item = FuncId> + '_ {
        self.funcs.keys()
    }

    /// Replaces the body of `id` (keeping its id and name).
    pub fn replace(&mut self, id: FuncId, func: Function) {
        assert_eq!(self.funcs[id].name, func.name, "replace must keep the name");
        self.funcs[id] = func;
    }

    /// The result types of an `autodiff` request (see `docs/ir.md`):
    /// - forward, `dual`: the callee's results, then one tangent per f64 result;
    /// - forward, `const`: nothing;
    /// - reverse: the adjoint of each `active` argument, in argument order.
    pub fn autodiff_result_types(&self, spec: &AutodiffSpec) -> Vec<Type> {
        let callee = &self.funcs[spec.func];
        match (spec.mode, spec.ret) {
            (Mode::Forward, RetActivity::Dual) => {
                let mut tys = callee.sig.results.clone();
                tys.extend(callee.sig.results.iter().filter(|&&t| t == Type::F64));
                tys
            }
            (Mode::Forward, _) => Vec::new(),
            (Mode::Reverse, _) => spec
                .args
                .iter()
                .filter(|a| **a == ArgActivity::Active)
                .map(|_| Type::F64)
                .collect(),
        }
    }

    /// All reachable functions from `root` by calls, autodiff requests and
    /// rules, `root` first, in a deterministic order.
    pub fn reachable_from(&self, root: FuncId) -> Vec<FuncId> {
        let mut seen = indexmap::IndexSet::new();
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            let next = self.funcs[id].referenced_functions();
            stack.extend(next.into_iter().rev());
        }
        seen.into_iter().collect()
    }
}
