//! The seed program of SPEC §1 / §7, through `autodiff` in source, under
//! every inlining schedule.

use super::cases::{build_src, SCHEDULES};
use super::support::*;

#[test]
fn seed_with_and_without_the_rule() {
    let src = example("seed.adz");
    let first = ["dg_custom".to_string(), "dg_plain".to_string()];
    for schedule in SCHEDULES {
        let m = build_src(&src, schedule, &first);
        for (dg, hvp, grad, hess) in [
            (
                "dg_custom",
                "hvp_custom",
                9.164000270468907,
                72.48292805436535,
            ),
            (
                "dg_plain",
                "hvp_plain",
                3.027209981231713,
                11.971902924433648,
            ),
        ] {
            let what = format!("{dg} under {schedule:?}");
            let out = run(&m, dg, &[a(&[2.0]), a(&[7.0])]);
            exact(array(&out, 1)[0], grad, &what);
            let out = run(&m, hvp, &[a(&[2.0]), a(&[1.0]), a(&[0.0]), a(&[0.0])]);
            exact(
                array(&out, 2)[0],
                grad,
                &format!("{hvp}: the gradient, {schedule:?}"),
            );
            exact(
                array(&out, 3)[0],
                hess,
                &format!("{hvp} under {schedule:?}"),
            );
        }
    }
}

#[test]
fn the_wrong_rule_by_hand() {
    // g = cos(f), f = Σx² = 4 at x = [2]: dret = -sin(4), and the rule gives
    // (2·dret·x)² = 16 sin²(4) — computed here in the rule's own order.
    let dret = -(4.0f64.sin());
    let want = (2.0 * dret * 2.0) * (2.0 * dret * 2.0);
    exact(want, 9.164000270468907, "16 sin²(4)");
}
