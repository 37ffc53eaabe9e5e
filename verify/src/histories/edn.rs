//! A minimal EDN reader: what Jepsen, Knossos and Porcupine histories use (vectors, lists,
//! maps, sets, keywords, integers, strings, `nil`, booleans, comments; commas are
//! whitespace). Anything else that looks like a token is kept as a symbol, and a tagged
//! literal as its value, so an unexpected field never stops a history from loading.

use super::ParseError;

/// An EDN value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edn {
    /// `nil`.
    Nil,
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A string, escapes resolved.
    Str(String),
    /// `:name`, without the colon.
    Keyword(String),
    /// Any other token (a symbol, a float, a character).
    Symbol(String),
    /// `[...]` or `(...)`.
    Seq(Vec<Edn>),
    /// `{...}`, in file order.
    Map(Vec<(Edn, Edn)>),
    /// `#{...}`.
    Set(Vec<Edn>),
}

impl Edn {
    /// The value of keyword `key` in a map.
    pub fn get(&self, key: &str) -> Option<&Edn> {
        match self {
            Edn::Map(entries) => entries
                .iter()
                .find(|(k, _)| matches!(k, Edn::Keyword(name) if name == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The keyword's name, if this is one.
    pub fn keyword(&self) -> Option<&str> {
        match self {
            Edn::Keyword(name) => Some(name),
            _ => None,
        }
    }

    /// The integer, if this is one.
    pub fn int(&self) -> Option<i64> {
        match self {
            Edn::Int(n) => Some(*n),
            _ => None,
        }
    }
}

/// A value and the line it starts on (1-based).
pub type Located = (usize, Edn);

/// Reads text holding exactly one value.
pub fn parse_one(text: &str, first_line: usize) -> Result<Edn, ParseError> {
    let mut reader = Reader::new(text, first_line);
    let value = reader.value()?;
    reader.end()?;
    Ok(value)
}

/// Reads text holding one vector or list, and returns its elements with their lines.
pub fn parse_elements(text: &str) -> Result<Vec<Located>, ParseError> {
    let mut reader = Reader::new(text, 1);
    reader.skip_blank();
    let close = match reader.peek() {
        Some(b'[') => b']',
        Some(b'(') => b')',
        _ => return Err(reader.error("expected the history to open with [ or (")),
    };
    reader.pos += 1;
    let mut items = Vec::new();
    loop {
        reader.skip_blank();
        if reader.peek() == Some(close) {
            reader.pos += 1;
            break;
        }
        let line = reader.line;
        items.push((line, reader.value()?));
    }
    reader.end()?;
    Ok(items)
}

/// Deeper nesting is refused: the reader recurses per level, and no history nests this far.
const MAX_DEPTH: usize = 100;

struct Reader<'t> {
    text: &'t [u8],
    pos: usize,
    line: usize,
    depth: usize,
}

/// Bytes that end a token.
fn is_delimiter(b: u8) -> bool {
    b.is_ascii_whitespace()
        || matches!(
            b,
            b',' | b'[' | b']' | b'(' | b')' | b'{' | b'}' | b'"' | b';'
        )
}

impl<'t> Reader<'t> {
    fn new(text: &'t str, first_line: usize) -> Self {
        Self {
            text: text.as_bytes(),
            pos: 0,
            line: first_line,
            depth: 0,
        }
    }

    fn error(&self, reason: impl Into<String>) -> ParseError {
        ParseError {
            line: self.line,
            reason: reason.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.pos += 1;
        if b == b'\n' {
            self.line += 1;
        }
        Some(b)
    }

    /// Skips whitespace, commas and `;` comments.
    fn skip_blank(&mut self) {
        while let Some(b) = self.peek() {
            if b == b';' {
                while self.peek().is_some_and(|b| b != b'\n') {
                    self.bump();
                }
            } else if b.is_ascii_whitespace() || b == b',' {
                self.bump();
            } else {
                break;
            }
        }
    }

    /// Nothing but blanks may follow the value.
    fn end(&mut self) -> Result<(), ParseError> {
        self.skip_blank();
        match self.peek() {
            None => Ok(()),
            Some(b) => Err(self.error(format!("unexpected {:?} after the value", b as char))),
        }
    }

    fn value(&mut self) -> Result<Edn, ParseError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        self.depth += 1;
        let value = self.nested();
        self.depth -= 1;
        value
    }

    fn nested(&mut self) -> Result<Edn, ParseError> {
        self.skip_blank();
        let Some(b) = self.peek() else {
            return Err(self.error("unexpected end of input"));
        };
        match b {
            b'[' | b'(' => {
                self.bump();
                Ok(Edn::Seq(self.items(if b == b'[' { b']' } else { b')' })?))
            }
            b'{' => {
                self.bump();
                self.map()
            }
            b'"' => {
                self.bump();
                self.string()
            }
            b'#' => {
                self.bump();
                self.dispatch()
            }
            b']' | b')' | b'}' => Err(self.error(format!("unexpected {:?}", b as char))),
            _ => Ok(self.token()),
        }
    }

    /// Values up to `close`, which is consumed.
    fn items(&mut self, close: u8) -> Result<Vec<Edn>, ParseError> {
        let mut items = Vec::new();
        loop {
            self.skip_blank();
            match self.peek() {
                Some(b) if b == close => {
                    self.bump();
                    return Ok(items);
                }
                None => return Err(self.error(format!("missing {:?}", close as char))),
                Some(_) => items.push(self.value()?),
            }
        }
    }

    fn map(&mut self) -> Result<Edn, ParseError> {
        let items = self.items(b'}')?;
        if items.len() % 2 != 0 {
            return Err(self.error("a map with a key but no value"));
        }
        let mut entries = Vec::with_capacity(items.len() / 2);
        let mut items = items.into_iter();
        while let (Some(k), Some(v)) = (items.next(), items.next()) {
            entries.push((k, v));
        }
        Ok(Edn::Map(entries))
    }

    /// After `#`: a set, a discarded value, or a tagged literal (kept as its value).
    fn dispatch(&mut self) -> Result<Edn, ParseError> {
        match self.peek() {
            Some(b'{') => {
                self.bump();
                Ok(Edn::Set(self.items(b'}')?))
            }
            Some(b'_') => {
                self.bump();
                self.value()?;
                self.value()
            }
            Some(b) if !is_delimiter(b) => {
                self.token();
                self.value()
            }
            _ => Err(self.error("a lone #")),
        }
    }

    /// After the opening quote.
    fn string(&mut self) -> Result<Edn, ParseError> {
        let start_line = self.line;
        let mut bytes = Vec::new();
        loop {
            match self.bump() {
                None => {
                    return Err(ParseError {
                        line: start_line,
                        reason: "unterminated string".into(),
                    });
                }
                Some(b'"') => break,
                Some(b'\\') => {
                    let escaped = self
                        .bump()
                        .ok_or_else(|| self.error("unterminated string"))?;
                    bytes.push(match escaped {
                        b'n' => b'\n',
                        b't' => b'\t',
                        b'r' => b'\r',
                        other => other,
                    });
                }
                Some(b) => bytes.push(b),
            }
        }
        String::from_utf8(bytes)
            .map(Edn::Str)
            .map_err(|_| self.error("a string that is not UTF-8"))
    }

    /// A keyword, number, `nil`, boolean or symbol.
    fn token(&mut self) -> Edn {
        let start = self.pos;
        // A character literal's first byte may itself be a delimiter (`\(`).
        if self.peek() == Some(b'\\') {
            self.bump();
            self.bump();
        }
        while self.peek().is_some_and(|b| !is_delimiter(b)) {
            self.bump();
        }
        let token = String::from_utf8_lossy(&self.text[start..self.pos]).into_owned();
        match token.as_str() {
            "nil" => Edn::Nil,
            "true" => Edn::Bool(true),
            "false" => Edn::Bool(false),
            _ => {
                if let Some(name) = token.strip_prefix(':') {
                    Edn::Keyword(name.to_owned())
                } else if let Ok(n) = token.parse::<i64>() {
                    Edn::Int(n)
                } else {
                    Edn::Symbol(token)
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_history_elements_with_their_lines() {
        let text = "; a comment\n[{:process 1, :type :invoke,\n :f :cas, :value [1 -2]}\n\
                    {:process :nemesis :value \"a #{b} ; c\" :error #{:x}}]\n";
        let items = parse_elements(text).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].0, 2);
        assert_eq!(items[1].0, 4);
        let first = &items[0].1;
        assert_eq!(first.get("process"), Some(&Edn::Int(1)));
        assert_eq!(first.get("type").and_then(Edn::keyword), Some("invoke"));
        assert_eq!(
            first.get("value"),
            Some(&Edn::Seq(vec![Edn::Int(1), Edn::Int(-2)]))
        );
        assert_eq!(
            items[1].1.get("value"),
            Some(&Edn::Str("a #{b} ; c".into()))
        );
    }

    #[test]
    fn reads_lists_nil_and_strings() {
        let v = parse_one("{:f :get, :key \"7\", :value nil, :ok true}", 1).unwrap();
        assert_eq!(v.get("key"), Some(&Edn::Str("7".into())));
        assert_eq!(v.get("value"), Some(&Edn::Nil));
        assert_eq!(v.get("ok"), Some(&Edn::Bool(true)));
        assert_eq!(parse_elements("(1 2)").unwrap().len(), 2);
    }

    #[test]
    fn names_the_line_of_an_error() {
        let err = parse_elements("[{:a 1}\n{:b 2\n").unwrap_err();
        assert_eq!(err.line, 3);
        let err = parse_elements("[{:a 1}\n{:b}]").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(parse_one("{:a 1} x", 1).is_err());
        assert!(parse_elements("{:a 1}").is_err());
        let deep = format!("[{}]", "[".repeat(100_000));
        assert_eq!(parse_elements(&deep).unwrap_err().line, 1);
    }
}
