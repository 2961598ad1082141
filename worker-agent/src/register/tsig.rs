//! **The TSIG key of `--tsig-key`** (RFC 8945): read from a key file in
//! BIND's format, as `tsig-keygen` writes it, and turned into the signer of
//! the registration's DNS UPDATE messages; plus the TSIG error codes a
//! server sends back, so that a refusal can say which check failed.

use hickory_proto::dnssec::rdata::tsig::TsigAlgorithm;
use hickory_proto::dnssec::rdata::TSIG;
use hickory_proto::dnssec::tsig::TSigner;
use hickory_proto::rr::Name;
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};
use rlx_proto::service::parse_domain;
use std::fmt;
use std::path::Path;

/// The TSIG fudge agents sign with, defined with the zone contract
/// (`rlx-doctor`'s clock check judges against the same value).
pub use rlx_proto::dnssd::TSIG_FUDGE;

/// Largest TSIG key file read: a `tsig-keygen` file is about 100 bytes, so
/// a bigger one is the wrong file (a whole `named.conf`, a log).
pub const MAX_KEY_FILE_BYTES: u64 = 16 * 1024;

/// A TSIG key: its name, algorithm and secret.
#[derive(Clone)]
pub struct TsigKey {
    /// The key name, as the server knows it.
    pub name: Name,
    /// `hmac-sha256` (or -sha384, -sha512).
    pub algorithm: TsigAlgorithm,
    secret: Vec<u8>,
}

impl fmt::Debug for TsigKey {
    /// Never the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TsigKey({} {})", self.name, self.algorithm)
    }
}

impl TsigKey {
    /// Reads a key file in BIND's format, as `tsig-keygen -a hmac-sha256
    /// NAME` writes it:
    ///
    /// ```text
    /// key "rlx-update" {
    ///     algorithm hmac-sha256;
    ///     secret "base64...";
    /// };
    /// ```
    ///
    /// The file must be private ([`rlx_proto::keys::read_private`]: no
    /// symbolic link, owned by this user or root, mode 0600, in a directory
    /// others cannot write): the key lets anyone rewrite the zone's rlx
    /// records. A file over [`MAX_KEY_FILE_BYTES`] is refused, not cut: a
    /// cut file would fail to parse with a misleading line number, or parse
    /// the wrong thing. Errors name the line of what is wrong.
    pub fn load(path: &Path) -> anyhow::Result<TsigKey> {
        let text = rlx_proto::keys::read_private(path, MAX_KEY_FILE_BYTES)
            .map_err(|e| anyhow::anyhow!("TSIG {e}"))?;
        parse_key_file(&text).map_err(|e| anyhow::anyhow!("TSIG key file {}: {e}", path.display()))
    }

    /// The signer for update messages.
    pub fn signer(&self) -> TSigner {
        TSigner::new(
            self.secret.clone(),
            self.algorithm.clone(),
            self.name.clone(),
            TSIG_FUDGE,
        )
        .expect("algorithm checked when the key was read")
    }
}

/// One token of a BIND-style key file, with its line.
#[derive(Debug, PartialEq)]
enum Tok {
    Word(String),
    Quoted(String),
    Punct(char),
}

fn tokens(text: &str) -> Result<Vec<(usize, Tok)>, String> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            '#' => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                loop {
                    match chars.next() {
                        None => return Err(format!("line {line}: unterminated /* comment")),
                        Some('/') if prev == '*' => break,
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            prev = c;
                        }
                    }
                }
            }
            '"' => {
                let start = line;
                let mut s = String::new();
                loop {
                    match chars.next() {
                        None => return Err(format!("line {start}: unterminated quoted string")),
                        Some('"') => break,
                        Some('\n') => {
                            line += 1;
                            s.push('\n')
                        }
                        Some(c) => s.push(c),
                    }
                }
                out.push((start, Tok::Quoted(s)));
            }
            '{' | '}' | ';' => out.push((line, Tok::Punct(c))),
            _ => {
                let mut w = String::from(c);
                while chars
                    .peek()
                    .is_some_and(|&c| !c.is_whitespace() && !"{};\"#".contains(c))
                {
                    w.push(chars.next().expect("peeked"));
                }
                out.push((line, Tok::Word(w)));
            }
        }
    }
    Ok(out)
}

/// Parses the first `key "NAME" { algorithm ALG; secret "B64"; };` of a
/// file (see [`TsigKey::load`]). Errors name the line and never quote the
/// secret.
pub fn parse_key_file(text: &str) -> Result<TsigKey, String> {
    let toks = tokens(text)?;
    let mut it = toks.iter().peekable();
    let Some((l, Tok::Word(k))) = it.next() else {
        return Err("no `key \"NAME\" { ... };` statement; generate one with `tsig-keygen -a hmac-sha256 NAME > FILE`".into());
    };
    if k != "key" {
        return Err(format!("line {l}: expected `key \"NAME\" {{`, found `{k}`"));
    }
    let name = match it.next() {
        Some((_, Tok::Quoted(n) | Tok::Word(n))) => n.clone(),
        _ => return Err(format!("line {l}: `key` needs a name")),
    };
    let name = parse_domain(&name).map_err(|e| format!("line {l}: key name: {e}"))?;
    match it.next() {
        Some((_, Tok::Punct('{'))) => {}
        _ => return Err(format!("line {l}: expected `{{` after the key name")),
    }
    let (mut algorithm, mut secret) = (None, None);
    loop {
        let Some((l, t)) = it.next() else {
            return Err("the key statement is not closed with `};`".into());
        };
        match t {
            Tok::Punct('}') => break,
            Tok::Word(w) if w == "algorithm" => {
                let Some((_, Tok::Word(a) | Tok::Quoted(a))) = it.next() else {
                    return Err(format!("line {l}: `algorithm` needs a value"));
                };
                let alg = match a.to_ascii_lowercase().as_str() {
                    "hmac-sha256" => TsigAlgorithm::HmacSha256,
                    "hmac-sha384" => TsigAlgorithm::HmacSha384,
                    "hmac-sha512" => TsigAlgorithm::HmacSha512,
                    other => {
                        return Err(format!(
                            "line {l}: algorithm `{other}` is not supported: use hmac-sha256 (tsig-keygen -a hmac-sha256)"
                        ))
                    }
                };
                algorithm = Some(alg);
            }
            Tok::Word(w) if w == "secret" => {
                let Some((_, Tok::Quoted(s) | Tok::Word(s))) = it.next() else {
                    return Err(format!("line {l}: `secret` needs a quoted base64 value"));
                };
                let clean: String = s.chars().filter(|c| !c.is_whitespace()).collect();
                let bytes = data_encoding::BASE64
                    .decode(clean.as_bytes())
                    .map_err(|_| format!("line {l}: the secret is not valid base64"))?;
                if bytes.len() < 16 {
                    return Err(format!(
                        "line {l}: the secret is {} bytes; use at least 16 (tsig-keygen makes 32)",
                        bytes.len()
                    ));
                }
                secret = Some(bytes);
            }
            Tok::Word(w) => return Err(format!("line {l}: unknown key field `{w}`")),
            _ => continue,
        }
        // Each field ends with `;`.
        match it.next() {
            Some((_, Tok::Punct(';'))) => {}
            _ => return Err(format!("line {l}: expected `;` after the field")),
        }
    }
    Ok(TsigKey {
        name,
        algorithm: algorithm.ok_or("the key has no `algorithm hmac-sha256;`")?,
        secret: secret.ok_or("the key has no `secret \"...\";`")?,
    })
}

/// TSIG error codes (RFC 8945 §3 / IANA): the ones a server sends back.
pub(super) fn tsig_error_name(code: u16) -> &'static str {
    match code {
        16 => "BADSIG",
        17 => "BADKEY",
        18 => "BADTIME",
        22 => "BADTRUNC",
        _ => "error",
    }
}

/// The error field of a TSIG RDATA (not exposed by hickory): after the
/// algorithm name, time (6), fudge (2), MAC (2 + len) and original id (2).
pub(super) fn tsig_error(t: &TSIG) -> Option<u16> {
    let mut buf = Vec::new();
    let mut enc = BinEncoder::new(&mut buf);
    t.emit(&mut enc).ok()?;
    let alg = t.algorithm().to_name().to_bytes().ok()?.len();
    let at = alg + 6 + 2 + 2 + t.mac().len() + 2;
    Some(u16::from_be_bytes([*buf.get(at)?, *buf.get(at + 1)?]))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const KEYGEN: &str = "key \"rlx-update\" {\n\talgorithm hmac-sha256;\n\tsecret \"vvQPqHcrK9CkkYJaFvTXwQ7sVnpFDRSyg5mMNf+gJAA=\";\n};\n";

    #[test]
    fn tsig_keygen_output_is_read() {
        let k = parse_key_file(KEYGEN).unwrap();
        assert_eq!(k.name.to_string(), "rlx-update.");
        assert_eq!(k.algorithm, TsigAlgorithm::HmacSha256);
        assert_eq!(k.secret.len(), 32);
        assert!(
            !format!("{k:?}").contains("vvQP"),
            "Debug must not show the secret"
        );
    }

    #[test]
    fn comments_and_layout_do_not_matter_in_a_key_file() {
        let text = "# made by tsig-keygen\n// another\n/* block\n comment */ key rlx-update { algorithm HMAC-SHA256; secret \"vvQPqHcrK9CkkYJaFvTXwQ7sVnpFDRSyg5mMNf+gJAA=\"; };";
        assert_eq!(
            parse_key_file(text).unwrap().name.to_string(),
            "rlx-update."
        );
    }

    #[test]
    fn a_bad_key_file_names_the_line_and_not_the_secret() {
        let e =
            parse_key_file("key \"k\" {\n algorithm hmac-md5;\n secret \"AAAA\";\n};").unwrap_err();
        assert!(e.contains("line 2") && e.contains("hmac-sha256"), "{e}");
        let e =
            parse_key_file("key \"k\" {\n algorithm hmac-sha256;\n secret \"not base64!!\";\n};")
                .unwrap_err();
        assert!(
            e.contains("line 3") && e.contains("base64") && !e.contains("not base64!!"),
            "{e}"
        );
        let e = parse_key_file("key \"k\" { algorithm hmac-sha256; };").unwrap_err();
        assert!(e.contains("secret"), "{e}");
        assert!(parse_key_file("").unwrap_err().contains("tsig-keygen"));
    }

    #[test]
    fn a_group_readable_key_file_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("k.conf");
        std::fs::write(&p, KEYGEN).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = TsigKey::load(&p).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        TsigKey::load(&p).unwrap();
    }

    /// Guards against silent truncation: a key file over 16 KiB was read up
    /// to 16 KiB and parsed as if that were all of it.
    #[test]
    fn a_key_file_over_16_kib_is_refused_naming_the_file_and_its_size() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("k.conf");
        // A valid key first, then padding: cut at 16 KiB it still parses.
        let text = format!("{KEYGEN}{}", "#".repeat(MAX_KEY_FILE_BYTES as usize));
        std::fs::write(&p, &text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = TsigKey::load(&p).unwrap_err().to_string();
        assert!(
            e.contains(&p.display().to_string())
                && e.contains(&format!("{} bytes", text.len()))
                && e.contains("TSIG"),
            "{e}"
        );
    }

    #[test]
    fn a_symbolic_link_to_a_key_file_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("k.conf");
        std::fs::write(&p, KEYGEN).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = d.path().join("link.conf");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let e = TsigKey::load(&link).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }
}
