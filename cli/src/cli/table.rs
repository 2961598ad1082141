//! **Aligned text tables** — columns as wide as their widest cell, so a
//! long host name (a Mac's `Johns-MacBook-Pro-2023-M3-Max.local`) pushes
//! the columns after it right instead of shifting its own row. Widths are
//! display widths (a CJK character takes two cells), and each column keeps
//! a minimum so that short tables look as they always did.

use unicode_width::UnicodeWidthStr;

/// Which side of its column a cell hugs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// One column: its heading, alignment, narrowest width, and the spaces
/// before it (the first column's are ignored).
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// The heading.
    pub head: &'static str,
    /// Which side the cells hug.
    pub align: Align,
    /// The narrowest the column gets.
    pub min: usize,
    /// Spaces between the previous column and this one.
    pub gap: usize,
}

/// The table: a heading line, then a line per row, each ending in `\n`.
/// Trailing spaces are trimmed. A row shorter than `cols` leaves the rest
/// empty.
pub fn render(cols: &[Column], rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|s| s.width())
                .chain([c.head.width(), c.min])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (i, (c, cell)) in cols.iter().zip(cells).enumerate() {
            if i > 0 {
                out.push_str(&" ".repeat(c.gap));
            }
            let pad = " ".repeat(widths[i].saturating_sub(cell.width()));
            match c.align {
                Align::Left => {
                    out.push_str(cell);
                    out.push_str(&pad);
                }
                Align::Right => {
                    out.push_str(&pad);
                    out.push_str(cell);
                }
            }
        }
        let mut out = out.trim_end().to_string();
        out.push('\n');
        out
    };
    let mut out = line(&mut cols.iter().map(|c| c.head));
    for r in rows {
        let mut cells = (0..cols.len()).map(|i| r.get(i).map_or("", String::as_str));
        out.push_str(&line(&mut cells));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: &[Column] = &[
        Column {
            head: "HOST",
            align: Align::Left,
            min: 20,
            gap: 0,
        },
        Column {
            head: "CORES",
            align: Align::Right,
            min: 5,
            gap: 1,
        },
        Column {
            head: "CLUSTER",
            align: Align::Left,
            min: 0,
            gap: 2,
        },
    ];

    fn row(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_40_character_host_name_widens_its_column_and_keeps_every_row_aligned() {
        let long = "Johns-MacBook-Pro-2023-M3-Max-Studio.lan";
        assert_eq!(long.len(), 40);
        let t = render(
            COLS,
            &[row(&["gpu-box", "64", "lab"]), row(&[long, "12", "lab"])],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        // Every row's CLUSTER starts where the heading's does, and its
        // CORES ends where the heading's does.
        let cluster_at = lines[0].find("CLUSTER").unwrap();
        let cores_end = lines[0].find("CORES").unwrap() + "CORES".len();
        assert_eq!(cluster_at, 40 + 1 + 5 + 2, "{t}");
        for l in &lines[1..] {
            assert_eq!(&l[cluster_at..], "lab", "{t}");
            assert!(l[..cores_end].ends_with(char::is_numeric), "{t}");
            assert_eq!(l.as_bytes()[cores_end], b' ', "{t}");
        }
    }

    #[test]
    fn short_cells_keep_the_minimum_widths() {
        let t = render(COLS, &[row(&["gpu-box", "64", "-"])]);
        assert_eq!(
            t,
            format!(
                "{:<20} {:>5}  CLUSTER\n{:<20} {:>5}  -\n",
                "HOST", "CORES", "gpu-box", "64"
            )
        );
    }

    #[test]
    fn wide_characters_count_as_two_cells() {
        let t = render(COLS, &[row(&["東京東京東京東京東京東京", "8", "x"])]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0].find("CLUSTER"), Some(24 + 1 + 5 + 2), "{t}");
        assert_eq!(
            lines[1].width(),
            lines[0].find("CLUSTER").unwrap() + 1,
            "{t}"
        );
    }
}
