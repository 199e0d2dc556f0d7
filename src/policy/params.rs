//! Policy parameters: each policy declares its parameters (name, type, range, default) in
//! its [`PolicyInfo`]; text given on the command line
//! (`name:key=value[:key=value...]`) is checked against that declaration once, when the
//! spec is parsed, so a policy is built from values known to be in range.

use std::collections::BTreeMap;

use serde::Serialize;

use super::PolicyInfo;

/// A policy parameter on the command line that does not match the policy's declaration.
#[derive(Debug, thiserror::Error)]
pub enum ParamError {
    /// The policy declares no parameter of this name.
    #[error("{policy}: unknown parameter {key:?} (it takes: {known})")]
    Unknown {
        /// The policy's registry name.
        policy: &'static str,
        /// The name given.
        key: String,
        /// The policy's parameter names, comma-separated, or "no parameters".
        known: String,
    },
    /// A declared parameter whose value is not a number, is out of range or is not one
    /// of the choices.
    #[error("{policy}: {key}={value:?}: {why}")]
    Bad {
        /// The policy's registry name.
        policy: &'static str,
        /// The parameter's name.
        key: String,
        /// The value as given.
        value: String,
        /// What is wrong with it, e.g. "must be within 100..=200".
        why: String,
    },
    /// A part without `=`: the part as given, and the policy's registry name.
    #[error("{policy}: expected key=value, found {0:?}", policy = .1)]
    Syntax(String, &'static str),
}

/// What values a parameter takes, and its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    /// An integer in `min..=max`.
    Int {
        /// Used when the spec does not set it.
        default: u64,
        /// Smallest accepted value.
        min: u64,
        /// Largest accepted value.
        max: u64,
    },
    /// One of the words in `options`.
    Choice {
        /// Used when the spec does not set it; one of `options`.
        default: &'static str,
        /// The accepted words.
        options: &'static [&'static str],
    },
}

/// One parameter a policy declares.
#[derive(Debug, Clone, Serialize)]
pub struct ParamInfo {
    /// The key on the command line, e.g. `pct` in `sis_util:pct=117`.
    pub name: &'static str,
    /// Its type, range or choices, and default.
    pub kind: ParamKind,
    /// One line on what it sets, for `sisreplay policies`.
    pub doc: &'static str,
}

impl ParamInfo {
    /// The default as it is written on the command line.
    pub fn default_text(&self) -> String {
        match self.kind {
            ParamKind::Int { default, .. } => default.to_string(),
            ParamKind::Choice { default, .. } => default.to_string(),
        }
    }

    /// Checks `text` against the declaration.
    fn value(&self, policy: &'static str, text: &str) -> Result<Value, ParamError> {
        let bad = |why: String| ParamError::Bad {
            policy,
            key: self.name.to_string(),
            value: text.to_string(),
            why,
        };
        match self.kind {
            ParamKind::Int { min, max, .. } => {
                let n: u64 = text.parse().map_err(|_| bad("not a number".into()))?;
                if !(min..=max).contains(&n) {
                    return Err(bad(format!("must be within {min}..={max}")));
                }
                Ok(Value::Int(n))
            }
            ParamKind::Choice { options, .. } => options
                .iter()
                .find(|o| **o == text)
                .map(|o| Value::Choice(o))
                .ok_or_else(|| bad(format!("expected {}", options.join(" or ")))),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    Int(u64),
    Choice(&'static str),
}

/// Parameter values for one policy, defaults filled in, each checked against its
/// declaration.
#[derive(Debug, Clone)]
pub struct Params {
    policy: &'static str,
    values: BTreeMap<&'static str, Value>,
}

impl Params {
    /// Every parameter at its default.
    pub fn defaults(info: &'static PolicyInfo) -> Params {
        let values = info
            .params
            .iter()
            .map(|p| {
                let v = match p.kind {
                    ParamKind::Int { default, .. } => Value::Int(default),
                    ParamKind::Choice { default, .. } => Value::Choice(default),
                };
                (p.name, v)
            })
            .collect();
        Params {
            policy: info.name,
            values,
        }
    }

    /// `key=value[:key=value...]` over the defaults.
    pub fn parse(info: &'static PolicyInfo, text: &str) -> Result<Params, ParamError> {
        let mut params = Params::defaults(info);
        for part in text.split(':').filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| ParamError::Syntax(part.to_string(), info.name))?;
            let Some(p) = info.params.iter().find(|p| p.name == k) else {
                return Err(ParamError::Unknown {
                    policy: info.name,
                    key: k.to_string(),
                    known: if info.params.is_empty() {
                        "no parameters".into()
                    } else {
                        info.params
                            .iter()
                            .map(|p| p.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
                });
            };
            params.values.insert(p.name, p.value(info.name, v)?);
        }
        Ok(params)
    }

    /// An integer parameter, within its declared range. Asking for one the policy does
    /// not declare is a programming error (every policy is built at its defaults by the
    /// registry's tests).
    pub fn int(&self, key: &str) -> u64 {
        match self.values.get(key) {
            Some(Value::Int(n)) => *n,
            _ => panic!("{}: no integer parameter {key:?} declared", self.policy),
        }
    }

    /// A choice parameter: one of its declared words.
    pub fn choice(&self, key: &str) -> &'static str {
        match self.values.get(key) {
            Some(Value::Choice(c)) => c,
            _ => panic!("{}: no choice parameter {key:?} declared", self.policy),
        }
    }

    /// The values in force, for reports.
    pub fn in_force(&self) -> BTreeMap<&'static str, String> {
        self.values
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    Value::Int(n) => n.to_string(),
                    Value::Choice(c) => c.to_string(),
                };
                (*k, text)
            })
            .collect()
    }
}
