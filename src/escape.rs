//! **Network text on a terminal** — names and reasons that strangers can
//! choose (mDNS instance labels, SRV targets, host and device names from
//! caps, refusal reasons quoting them) made safe to print as one line.
//!
//! Every human printer goes through here (the report, `browse`, `watch`,
//! the `# found by` comments); JSON output stays raw, since serde escapes
//! it. docs/security.md, "Untrusted text in human output", says what an attacker could do
//! otherwise.

/// Network-supplied text (an mDNS instance label, an SRV host name, a host
/// name or device name from caps), made safe to print on one terminal line:
/// control characters (newlines, ESC, C1 controls), bidi overrides and
/// other invisible format characters are escaped the way Rust escapes them
/// (`\n`, `\u{1b}`, `\u{202e}`), so a stranger cannot start a fake report
/// line or send the terminal an escape sequence. A name made only of the
/// characters of host names and addresses is printed as it is; anything
/// else (a space, a quote, an escaped character) is printed in double
/// quotes, like `ls` quotes an odd file name, so the name's end is never in
/// doubt. The one function every human printer uses (report, `browse`,
/// `watch`, the `# found by` comments); JSON output stays raw, since serde
/// escapes it.
pub fn untrusted(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']' | '%' | '@')
        });
    if plain {
        return s.to_string();
    }
    quoted(s)
}

/// `s` always in double quotes, escaped as [`untrusted`] escapes it: for
/// a name that is plain by its characters but must not be read as the
/// writer's own words (a host name `id:0123456789abcdef` in a `# found by`
/// comment, which is read back for the node's id).
pub(crate) fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\'' => out.push(c),
            c => out.extend(c.escape_debug()),
        }
    }
    out.push('"');
    out
}

/// A line of human output that may quote network text (a refusal reason,
/// a warning), made safe to print as one line: the same characters as in
/// [`untrusted`] are escaped, but nothing is quoted and quotes and
/// backslashes stay as they are, so the text reads as written.
pub fn escape_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' | '\'' | '\\' => out.push(c),
            c => out.extend(c.escape_debug()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_host_names_and_addresses_print_as_they_are() {
        for s in [
            "gpu-a",
            "10.0.0.5:9100",
            "[fe80::1%eth0]:9100",
            "box_1.local",
        ] {
            assert_eq!(untrusted(s), s);
        }
    }

    /// Guards against terminal escape sequences and bidi overrides in a
    /// name reaching the terminal raw.
    #[test]
    fn control_and_bidi_characters_are_escaped_and_the_name_quoted() {
        assert_eq!(untrusted("a\x1b[2Jb"), "\"a\\u{1b}[2Jb\"");
        assert_eq!(untrusted("evil\u{202e}txt.exe"), "\"evil\\u{202e}txt.exe\"");
        assert_eq!(untrusted("My Mac's \"GPU\""), "\"My Mac's \\\"GPU\\\"\"");
        assert_eq!(untrusted(""), "\"\"");
        assert_eq!(
            escape_line("a \"b\"\n\u{85}c\u{2028}"),
            "a \"b\"\\n\\u{85}c\\u{2028}"
        );
    }
}
