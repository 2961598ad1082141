//! **The man pages' own sections, rendered once for both programs** —
//! what clap cannot derive from the flags (ENVIRONMENT, FILES, SEE ALSO),
//! as data each program keeps beside its CLI, and their roff here, so that
//! `rlx-discover`'s and `rlx-agent`'s pages are escaped and placed alike.
//! Here because it is the one crate both programs share (the agent carries
//! no man-page generator: its page is rendered at release time).

/// A section of a page: its heading and its entries, each a term (set in
/// bold) and what it means.
pub struct Section {
    /// The heading, as man pages spell it (`ENVIRONMENT`).
    pub title: &'static str,
    /// (term, meaning) pairs.
    pub entries: &'static [(&'static str, &'static str)],
}

/// `s` as roff text: backslashes and hyphens escaped, and a line that
/// starts with a control character (`.` or `'`) kept as text.
pub fn roff_text(s: &str) -> String {
    let t = s.replace('\\', "\\e").replace('-', "\\-");
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}")
    } else {
        t
    }
}

/// `sections` as roff.
pub fn render_sections(sections: &[Section]) -> String {
    let mut out = String::new();
    for s in sections {
        out.push_str(&format!(".SH \"{}\"\n", s.title));
        for (term, text) in s.entries {
            out.push_str(&format!(
                ".TP\n\\fB{}\\fR\n{}\n",
                roff_text(term),
                roff_text(text)
            ));
        }
    }
    out
}

/// clap's page (`page`, roff) with `sections` before its VERSION section,
/// where man pages keep them, or at its end when it has none.
pub fn with_sections(page: &str, sections: &[Section]) -> String {
    let ours = render_sections(sections);
    match page.find(".SH VERSION") {
        Some(at) => format!("{}{ours}{}", &page[..at], &page[at..]),
        None => format!("{page}{ours}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &[Section] = &[Section {
        title: "FILES",
        entries: &[("/etc/rlx/agent.toml", "The agent's settings.")],
    }];

    #[test]
    fn the_sections_go_before_version_or_at_the_end() {
        let page = with_sections(".TH x 1\n.SH NAME\nx\n.SH VERSION\nv1\n", ONE);
        let files = page.find(".SH \"FILES\"").unwrap();
        assert!(files < page.find(".SH VERSION").unwrap(), "{page}");
        let page = with_sections(".TH x 1\n", ONE);
        assert!(page.ends_with(&render_sections(ONE)), "{page}");
    }

    #[test]
    fn roff_text_escapes_hyphens_backslashes_and_leading_dots() {
        assert_eq!(roff_text("a-b\\c"), "a\\-b\\ec");
        assert_eq!(roff_text(".x"), "\\&.x");
        assert_eq!(roff_text(".pins"), "\\&.pins");
    }
}
