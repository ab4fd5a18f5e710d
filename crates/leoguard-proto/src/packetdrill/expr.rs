//! The small Python subset `%{ ... }%` blocks may use: `assert EXPR[, MSG]`, `NAME = EXPR`,
//! `print(...)`, `pass`; expressions with numbers, strings, True/False, names, `+ - * / // %`,
//! comparisons (chained, as Python), `and`/`or`/`not` and parentheses. Anything else is unsupported.

use std::collections::BTreeMap;

/// A value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
    /// A boolean.
    Bool(bool),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) => write!(f, "{s}"),
            Value::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
        }
    }
}

impl Value {
    fn truthy(&self) -> bool {
        match self {
            Value::Int(i) => *i != 0,
            Value::Float(x) => *x != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Bool(b) => *b,
        }
    }
    fn num(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(x) => Some(*x),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            Value::Str(_) => None,
        }
    }
    fn int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }
}

/// Why a block did not run to its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodeError {
    /// An assertion failed: the expression's text and the message (or the values compared).
    Assert {
        /// Line within the script.
        line: usize,
        /// The assertion's expression.
        expr: String,
        /// Its message, or a description of what was compared.
        got: String,
    },
    /// Something the evaluator does not implement.
    Unsupported {
        /// Line within the script.
        line: usize,
        /// What.
        feature: String,
    },
    /// A syntax error.
    Syntax {
        /// Line within the script.
        line: usize,
        /// The offending token.
        token: String,
        /// What was expected.
        expected: String,
    },
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(Value),
    Str(String),
    Name(String),
    Op(&'static str),
}

fn tok_text(t: Option<&Tok>) -> String {
    match t {
        None => "end of statement".into(),
        Some(Tok::Num(v)) => v.to_string(),
        Some(Tok::Str(s)) => format!("'{s}'"),
        Some(Tok::Name(n)) => n.clone(),
        Some(Tok::Op(o)) => (*o).to_string(),
    }
}

const OPS: [&str; 20] =
    ["//", "==", "!=", "<=", ">=", "**", "+", "-", "*", "/", "%", "<", ">", "(", ")", ",", "=", "[", "]", ":"];

fn lex(line: usize, s: &str) -> Result<Vec<Tok>, CodeError> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || (c == '.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let st = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b'_') {
                i += 1;
            }
            let t = s[st..i].replace('_', "");
            let v = if let Some(h) = t.strip_prefix("0x") {
                i64::from_str_radix(h, 16).ok().map(Value::Int)
            } else if t.contains(['.', 'e']) {
                t.parse().ok().map(Value::Float)
            } else {
                t.parse().ok().map(Value::Int)
            };
            let v = v.ok_or_else(|| CodeError::Syntax { line, token: t.clone(), expected: "a number".into() })?;
            out.push(Tok::Num(v));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let st = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Name(s[st..i].to_string()));
        } else if c == '"' || c == '\'' {
            let end = s[i + 1..].find(c).ok_or_else(|| CodeError::Syntax {
                line,
                token: s[i..].to_string(),
                expected: "a closing quote".into(),
            })?;
            out.push(Tok::Str(s[i + 1..i + 1 + end].to_string()));
            i += end + 2;
        } else if c == '#' {
            break;
        } else if let Some(op) = OPS.iter().find(|o| s[i..].starts_with(**o)) {
            out.push(Tok::Op(op));
            i += op.len();
        } else {
            return Err(CodeError::Syntax { line, token: c.to_string(), expected: "an expression".into() });
        }
    }
    Ok(out)
}

/// Runs statements against variables (`vars`: the snapshot's names and those assigned before).
pub struct Interp<'a> {
    vars: &'a mut BTreeMap<String, Value>,
    toks: Vec<Tok>,
    pos: usize,
    line: usize,
}

/// Runs one `%{ ... }%` block starting at script line `first_line`.
pub fn run_block(code: &str, first_line: usize, vars: &mut BTreeMap<String, Value>) -> Result<(), CodeError> {
    for (k, raw) in code.lines().enumerate() {
        let line = first_line + k;
        for stmt in raw.split(';') {
            let st = stmt.trim();
            if st.is_empty() || st.starts_with('#') {
                continue;
            }
            let toks = lex(line, st)?;
            let mut it = Interp { vars, toks, pos: 0, line };
            it.statement(st)?;
        }
    }
    Ok(())
}

impl Interp<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn is_op(&self, op: &str) -> bool {
        matches!(self.peek(), Some(Tok::Op(o)) if *o == op)
    }
    fn is_name(&self, n: &str) -> bool {
        matches!(self.peek(), Some(Tok::Name(x)) if x == n)
    }
    fn syntax(&self, expected: &str) -> CodeError {
        CodeError::Syntax { line: self.line, token: tok_text(self.peek()), expected: expected.into() }
    }
    fn unsupported(&self, feature: impl Into<String>) -> CodeError {
        CodeError::Unsupported { line: self.line, feature: feature.into() }
    }
    fn expect_end(&self) -> Result<(), CodeError> {
        if self.pos < self.toks.len() {
            return Err(self.syntax("end of statement"));
        }
        Ok(())
    }

    fn statement(&mut self, text: &str) -> Result<(), CodeError> {
        match self.peek().cloned() {
            Some(Tok::Name(n)) if n == "assert" => {
                self.pos += 1;
                let v = self.expr()?;
                let expr_text = text.trim_start_matches("assert").split(',').next().unwrap_or("").trim().to_string();
                let msg = if self.is_op(",") {
                    self.pos += 1;
                    Some(self.expr()?)
                } else {
                    None
                };
                self.expect_end()?;
                if !v.truthy() {
                    let got = msg.map(|m| m.to_string()).unwrap_or_default();
                    return Err(CodeError::Assert { line: self.line, expr: expr_text, got });
                }
                Ok(())
            }
            Some(Tok::Name(n)) if n == "pass" => {
                self.pos += 1;
                self.expect_end()
            }
            Some(Tok::Name(n)) if n == "print" => {
                self.pos += 1;
                if !self.is_op("(") {
                    return Err(self.syntax("'(' after print"));
                }
                self.pos += 1;
                while !self.is_op(")") {
                    self.expr()?;
                    if self.is_op(",") {
                        self.pos += 1;
                    } else if !self.is_op(")") {
                        return Err(self.syntax("',' or ')'"));
                    }
                }
                self.pos += 1;
                self.expect_end()
            }
            Some(Tok::Name(n))
                if ["if", "for", "while", "def", "import", "from", "with", "try", "lambda", "class", "return"]
                    .contains(&n.as_str()) =>
            {
                Err(self.unsupported(format!("python '{n}' in a code block")))
            }
            Some(Tok::Name(n)) if matches!(self.toks.get(1), Some(Tok::Op("="))) => {
                self.pos += 2;
                let v = self.expr()?;
                self.expect_end()?;
                self.vars.insert(n, v);
                Ok(())
            }
            _ => {
                self.expr()?;
                self.expect_end()
            }
        }
    }

    fn expr(&mut self) -> Result<Value, CodeError> {
        let mut v = self.and_expr()?;
        while self.is_name("or") {
            self.pos += 1;
            let r = self.and_expr()?;
            if !v.truthy() {
                v = r;
            }
        }
        Ok(v)
    }

    fn and_expr(&mut self) -> Result<Value, CodeError> {
        let mut v = self.not_expr()?;
        while self.is_name("and") {
            self.pos += 1;
            let r = self.not_expr()?;
            if v.truthy() {
                v = r;
            }
        }
        Ok(v)
    }

    fn not_expr(&mut self) -> Result<Value, CodeError> {
        if self.is_name("not") {
            self.pos += 1;
            let v = self.not_expr()?;
            return Ok(Value::Bool(!v.truthy()));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Value, CodeError> {
        let mut left = self.sum()?;
        let mut result: Option<bool> = None;
        loop {
            let op = match self.peek() {
                Some(Tok::Op(o)) if ["==", "!=", "<", "<=", ">", ">="].contains(o) => *o,
                Some(Tok::Name(n)) if n == "in" || n == "is" => return Err(self.unsupported(format!("python '{n}'"))),
                _ => break,
            };
            self.pos += 1;
            let right = self.sum()?;
            let ok = compare(op, &left, &right).ok_or_else(|| {
                self.unsupported(format!("comparing {} with {} using {op}", type_name(&left), type_name(&right)))
            })?;
            result = Some(result.unwrap_or(true) && ok);
            left = right;
        }
        Ok(match result {
            Some(b) => Value::Bool(b),
            None => left,
        })
    }

    fn sum(&mut self) -> Result<Value, CodeError> {
        let mut v = self.term()?;
        while self.is_op("+") || self.is_op("-") {
            let op = if self.is_op("+") { "+" } else { "-" };
            self.pos += 1;
            let r = self.term()?;
            v = self.arith(op, &v, &r)?;
        }
        Ok(v)
    }

    fn term(&mut self) -> Result<Value, CodeError> {
        let mut v = self.unary()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Op(o)) if ["*", "/", "//", "%"].contains(o) => *o,
                Some(Tok::Op("**")) => return Err(self.unsupported("python '**'")),
                _ => break,
            };
            self.pos += 1;
            let r = self.unary()?;
            v = self.arith(op, &v, &r)?;
        }
        Ok(v)
    }

    fn unary(&mut self) -> Result<Value, CodeError> {
        if self.is_op("-") {
            self.pos += 1;
            let v = self.unary()?;
            return self.arith("-", &Value::Int(0), &v);
        }
        if self.is_op("+") {
            self.pos += 1;
            return self.unary();
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Value, CodeError> {
        let t = self.peek().cloned();
        self.pos += 1;
        let v = match t {
            Some(Tok::Num(v)) => v,
            Some(Tok::Str(s)) => Value::Str(s),
            Some(Tok::Name(n)) if n == "True" => Value::Bool(true),
            Some(Tok::Name(n)) if n == "False" => Value::Bool(false),
            Some(Tok::Name(n)) => {
                if self.is_op("(") {
                    return Err(self.unsupported(format!("python call {n}()")));
                }
                if self.is_op("[") || self.is_op(".") {
                    return Err(self.unsupported(format!("python subscript/attribute on {n}")));
                }
                match self.vars.get(&n) {
                    Some(v) => v.clone(),
                    None if n.starts_with("tcpi_") => return Err(self.unsupported(format!("TCP_INFO field {n}"))),
                    None => {
                        return Err(CodeError::Syntax { line: self.line, token: n, expected: "a defined name".into() })
                    }
                }
            }
            Some(Tok::Op("(")) => {
                let mut v = self.expr()?;
                if self.is_op(",") {
                    // A tuple, as an assertion message: shown as Python prints it.
                    let mut items = vec![v.to_string()];
                    while self.is_op(",") {
                        self.pos += 1;
                        items.push(self.expr()?.to_string());
                    }
                    v = Value::Str(format!("({})", items.join(", ")));
                }
                if !self.is_op(")") {
                    return Err(self.syntax("')'"));
                }
                self.pos += 1;
                v
            }
            _ => {
                self.pos -= 1;
                return Err(self.syntax("a value"));
            }
        };
        Ok(v)
    }

    fn arith(&self, op: &str, a: &Value, b: &Value) -> Result<Value, CodeError> {
        if let (Value::Str(x), Value::Str(y), "+") = (a, b, op) {
            return Ok(Value::Str(format!("{x}{y}")));
        }
        let bad = || self.unsupported(format!("{} {op} {}", type_name(a), type_name(b)));
        if let (Some(x), Some(y)) = (a.int(), b.int()) {
            return match op {
                "+" => x.checked_add(y).map(Value::Int).ok_or_else(bad),
                "-" => x.checked_sub(y).map(Value::Int).ok_or_else(bad),
                "*" => x.checked_mul(y).map(Value::Int).ok_or_else(bad),
                "/" if y != 0 => Ok(Value::Float(x as f64 / y as f64)),
                "//" if y != 0 => Ok(Value::Int(x.div_euclid(y) - i64::from(x.rem_euclid(y) != 0 && y < 0))),
                "%" if y != 0 => Ok(Value::Int(((x % y) + y) % y)),
                _ => Err(self.unsupported("division by zero")),
            };
        }
        let (x, y) = (a.num().ok_or_else(bad)?, b.num().ok_or_else(bad)?);
        match op {
            "+" => Ok(Value::Float(x + y)),
            "-" => Ok(Value::Float(x - y)),
            "*" => Ok(Value::Float(x * y)),
            "/" if y != 0.0 => Ok(Value::Float(x / y)),
            "//" if y != 0.0 => Ok(Value::Float((x / y).floor())),
            "%" if y != 0.0 => Ok(Value::Float(x - y * (x / y).floor())),
            _ => Err(self.unsupported("division by zero")),
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Int(_) => "int",
        Value::Float(_) => "float",
        Value::Str(_) => "str",
        Value::Bool(_) => "bool",
    }
}

fn compare(op: &str, a: &Value, b: &Value) -> Option<bool> {
    let ord = match (a, b) {
        (Value::Str(x), Value::Str(y)) => x.cmp(y),
        (Value::Str(_), _) | (_, Value::Str(_)) => {
            return match op {
                "==" => Some(false),
                "!=" => Some(true),
                _ => None,
            }
        }
        _ => a.num()?.partial_cmp(&b.num()?)?,
    };
    use std::cmp::Ordering::*;
    Some(match op {
        "==" => ord == Equal,
        "!=" => ord != Equal,
        "<" => ord == Less,
        "<=" => ord != Greater,
        ">" => ord == Greater,
        _ => ord != Less,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(code: &str) -> Result<BTreeMap<String, Value>, CodeError> {
        let mut vars = BTreeMap::new();
        vars.insert("tcpi_snd_cwnd".to_string(), Value::Int(10));
        run_block(code, 1, &mut vars)?;
        Ok(vars)
    }

    #[test]
    fn asserts_and_assignments() {
        let v = run(
            "x = tcpi_snd_cwnd * 2 + 1\nassert x == 21, x\nassert 5 <= x < 30 and not x == 3\ny = 7 // 2; z = 7 / 2",
        )
        .unwrap();
        assert_eq!(v["y"], Value::Int(3));
        assert_eq!(v["z"], Value::Float(3.5));
        let e = run("\nassert tcpi_snd_cwnd == 9, tcpi_snd_cwnd").unwrap_err();
        assert_eq!(e, CodeError::Assert { line: 2, expr: "tcpi_snd_cwnd == 9".into(), got: "10".into() });
        let e = run("assert (tcpi_snd_cwnd, 1) == 0 or tcpi_snd_cwnd == 9, (tcpi_snd_cwnd, 2)").unwrap_err();
        assert!(matches!(e, CodeError::Assert { got, .. } if got == "(10, 2)"));
    }

    #[test]
    fn unsupported_and_syntax() {
        assert!(matches!(run("if x: pass"), Err(CodeError::Unsupported { .. })));
        assert!(matches!(run("assert tcpi_foo == 1"), Err(CodeError::Unsupported { .. })));
        assert!(matches!(run("assert 1 == = 2"), Err(CodeError::Syntax { .. })));
        assert!(matches!(run("assert len(x) == 1"), Err(CodeError::Unsupported { .. })));
    }
}
