//! Check lists, rendered the one way: doctor's, verify's and the cluster's line up the same.

use super::{Output, Style};
use crate::check::Check;

/// The name column's width: most names fit (`rdma:rocep194s0f0/1:mtu`); a longer one pushes its
/// message along rather than being cut.
const NAME_WIDTH: usize = 24;

impl Output {
    /// One line per check (`pass  name  message`), and its fix under it when there is one.
    pub fn checks<'a>(&self, checks: impl IntoIterator<Item = &'a Check>) {
        for check in checks {
            self.line(&format!("{}  {:<NAME_WIDTH$} {}", self.status_label(check.status), check.name, check.message));
            if let Some(fix) = &check.fix {
                self.line(&format!("      {:<NAME_WIDTH$} {} {fix}", "", self.paint("fix:", Style::Dim)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::check::{Check, Status};

    #[test]
    fn names_line_up_and_fixes_sit_under_their_message() {
        let (out, stdout, _) = super::super::captured(false);
        out.checks(&[
            Check::new("gpu", Status::Pass, "gfx1151 at /dev/kfd", None),
            Check::new("group:render", Status::Fail, "alice is not in render", Some("usermod -aG render alice".into())),
        ]);
        assert_eq!(
            stdout.text(),
            "pass  gpu                      gfx1151 at /dev/kfd\n\
             FAIL  group:render             alice is not in render\n      \
             \x20                        fix: usermod -aG render alice\n"
        );
    }
}
