//! Policy parameters as given on the command line: `name:key=value[:key=value...]`.

use std::collections::BTreeMap;

use super::PolicyInfo;

#[derive(Debug, thiserror::Error)]
pub enum ParamError {
    #[error("{policy}: unknown parameter {key:?} (it takes: {known})")]
    Unknown {
        policy: &'static str,
        key: String,
        known: String,
    },
    #[error("{policy}: {key}={value:?}: {why}")]
    Bad {
        policy: &'static str,
        key: String,
        value: String,
        why: String,
    },
    #[error("{policy}: expected key=value, found {0:?}", policy = .1)]
    Syntax(String, &'static str),
}

/// Parameter values for one policy, defaults filled in.
#[derive(Debug, Clone)]
pub struct Params {
    policy: &'static str,
    values: BTreeMap<&'static str, String>,
}

impl Params {
    pub fn parse(info: &'static PolicyInfo, text: &str) -> Result<Params, ParamError> {
        let mut values: BTreeMap<&'static str, String> = info
            .params
            .iter()
            .map(|p| (p.name, p.default.to_string()))
            .collect();
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
            values.insert(p.name, v.to_string());
        }
        Ok(Params {
            policy: info.name,
            values,
        })
    }

    /// A parameter as a number in `range`.
    pub fn get<T>(
        &self,
        key: &'static str,
        range: std::ops::RangeInclusive<T>,
    ) -> Result<T, ParamError>
    where
        T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
    {
        let v = self.values.get(key).map(String::as_str).unwrap_or("");
        let bad = |why: String| ParamError::Bad {
            policy: self.policy,
            key: key.to_string(),
            value: v.to_string(),
            why,
        };
        let n: T = v.parse().map_err(|_| bad("not a number".into()))?;
        if !range.contains(&n) {
            return Err(bad(format!(
                "must be within {}..={}",
                range.start(),
                range.end()
            )));
        }
        Ok(n)
    }

    /// The values in force, for reports.
    pub fn in_force(&self) -> &BTreeMap<&'static str, String> {
        &self.values
    }
}
