//! `adze check-inline`: no difference on any example; a fault injected
//! into the pipeline (through `Session::after_inline`) is found and shown.

use crate::support::{examples, root};
use adze::check_inline::{check_inline, render, InlineCheckOptions};
use adze_ir::{InstData, Module};

fn options(samples: usize) -> InlineCheckOptions {
    InlineCheckOptions {
        samples,
        ..InlineCheckOptions::default()
    }
}

#[test]
fn no_example_changes_with_the_inline_setting() {
    let mut checked = 0;
    for path in examples() {
        let session = adze::Session::from_file(&path).unwrap();
        match check_inline(&session, &path, &options(2)) {
            Ok(report) => {
                assert!(
                    report.differences.is_empty(),
                    "{}:\n{}",
                    path.display(),
                    render(&report)
                );
                checked += report.runs;
            }
            // An example without `autodiff` has nothing to check.
            Err(e) => assert!(
                e.to_string().contains("no function with an `autodiff`"),
                "{e}"
            ),
        }
    }
    assert!(checked > 1000, "only {checked} runs");
}

/// A "pass" after the inliner that changes the last bit of every f64
/// constant 2.0: settings that inline now differ from those that do not.
fn perturb_twos(module: &mut Module) {
    let ids: Vec<_> = module.iter().map(|(id, _)| id).collect();
    for id in ids {
        let f = module.func_mut(id);
        let insts: Vec<_> = f.layout.insts().map(|(_, i)| i).collect();
        for inst in insts {
            if let InstData::FConst { bits } = f.dfg.inst_mut(inst) {
                if f64::from_bits(*bits) == 2.0 {
                    *bits = 2.0f64.to_bits() + 1;
                }
            }
        }
    }
}

#[test]
fn a_broken_pass_is_reported_with_the_value_and_the_commands() {
    let src = "
fn f(x: f64) -> f64 { 2.0 * x * x }
fn g(x: f64) -> f64 { sin(f(x)) }
fn dg(x: f64) -> f64 { autodiff(reverse, g, active, active(x)) }
";
    let path = root().join("broken.adz");
    let mut session = adze::Session::from_source("broken.adz", src).unwrap();
    let clean = check_inline(&session, &path, &options(3)).unwrap();
    assert!(clean.differences.is_empty(), "{}", render(&clean));
    session.after_inline = Some(perturb_twos);
    let report = check_inline(&session, &path, &options(3)).unwrap();
    let text = render(&report);
    assert_eq!(report.differences.len(), 3, "{text}");
    let d = &report.differences[0];
    assert_eq!(d.target.func, "dg");
    assert_eq!(d.reference.inline, adze::InlineSetting::None);
    assert_ne!(d.other.inline, adze::InlineSetting::None);
    assert!(d.first.starts_with("result 0: "), "{}", d.first);
    assert!(d.commands[0].contains("--fn dg --arg x=") && d.commands[0].contains("--inline none"));
    assert!(
        text.contains("DIFFERENCE in `dg` at sample 0: result 0: "),
        "{text}"
    );
    // `--fn`: the derivatives of `g` in every mode.
    let by_fn = InlineCheckOptions {
        func: Some("g".into()),
        ..options(2)
    };
    let report = check_inline(&session, &path, &by_fn).unwrap();
    assert_eq!(report.targets.len(), 3);
    assert!(!report.differences.is_empty());
    assert!(render(&report).contains("the reverse derivative of `g`"));
}

/// The names `check-inline` prints in its commands are the command line's.
#[test]
fn setting_names_are_the_command_lines() {
    use clap::ValueEnum;
    for s in adze::InlineSetting::ALL {
        assert_eq!(s.to_possible_value().unwrap().get_name(), s.name());
    }
    for e in [adze::Engine::Jit, adze::Engine::Interp] {
        assert_eq!(e.to_possible_value().unwrap().get_name(), e.name());
    }
}
