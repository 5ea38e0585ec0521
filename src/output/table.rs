//! The cluster's tables: one row per fact, one column per node (`cluster doctor`, `cluster status`,
//! `cluster model list`).

use super::{Output, Style};
use crate::check::Status;

/// A row of the table: its name, then one (status, text) cell per node.
pub type Row = (String, Vec<(Option<Status>, String)>);

impl Output {
    /// A table: one column per node, padded before painting so colours do not skew it.
    pub fn node_table(&self, nodes: &[String], rows: &[Row]) {
        const MAX: usize = 28;
        let clip = |text: &str| -> String {
            if text.chars().count() > MAX {
                format!("{}…", text.chars().take(MAX - 1).collect::<String>())
            } else {
                text.to_string()
            }
        };
        let first = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0).max(5);
        let widths: Vec<usize> = (0..nodes.len())
            .map(|i| {
                let cells = rows.iter().map(|(_, cells)| clip(&cells[i].1).chars().count());
                cells.chain([nodes[i].chars().count().min(MAX)]).max().unwrap_or(0)
            })
            .collect();
        let mut header = format!("{:<first$}", "");
        for (node, width) in nodes.iter().zip(&widths) {
            header.push_str(&format!("  {:<width$}", clip(node)));
        }
        self.line(&self.paint(header.trim_end(), Style::Bold));
        for (name, cells) in rows {
            let mut line = format!("{name:<first$}");
            for ((status, text), width) in cells.iter().zip(&widths) {
                line.push_str("  ");
                line.push_str(&self.paint_status(*status, &format!("{:<width$}", clip(text))));
            }
            self.line(line.trim_end());
        }
    }
}
