//! Checking request bodies: [`Problems`] collects every bad field of a request into one 422,
//! with the checks several resources share (uids, signing secrets, metadata maps).

use vow_core::InvalidName;

use crate::error::{ApiError, ApiResult, ValidationItem};

/// Collects field errors so one response can name every bad field.
#[derive(Default)]
pub struct Problems(Vec<ValidationItem>);

impl Problems {
    /// Records `result`'s error at `loc`, returning the value when valid.
    pub fn check<T>(&mut self, loc: &[&str], result: Result<T, InvalidName>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                self.0.push(ValidationItem::new(loc, e.message, e.kind));
                None
            }
        }
    }

    /// Records a problem at `loc` when `ok` is false.
    pub fn require(&mut self, ok: bool, loc: &[&str], msg: &str, kind: &str) {
        if !ok {
            self.0.push(ValidationItem::new(loc, msg, kind));
        }
    }

    /// Records a problem when `text` holds a NUL character, which no store keeps faithfully.
    pub fn no_nul(&mut self, loc: &[&str], text: &str) {
        self.require(
            !text.contains('\0'),
            loc,
            "must not contain NUL characters",
            "value_error.str.nul",
        );
    }

    /// [`Problems::no_nul`] for every key and value of a metadata map.
    pub fn no_nul_in_map(
        &mut self,
        loc: &[&str],
        map: &std::collections::BTreeMap<String, String>,
    ) {
        for (k, v) in map {
            let at: Vec<&str> = loc.iter().copied().chain([k.as_str()]).collect();
            self.no_nul(&at, k);
            self.no_nul(&at, v);
        }
    }

    /// Ok when nothing was recorded, else 422 with every problem.
    pub fn finish(self) -> ApiResult<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ApiError::Validation(self.0))
        }
    }
}

/// Refuses uids that would be read as ids in paths.
pub fn check_uid(problems: &mut Problems, loc: &[&str], uid: &str) -> Option<String> {
    let uid = problems.check(loc, vow_core::Uid::parse(uid))?;
    if vow_core::name::looks_like_an_id(uid.as_str()) {
        problems.require(
            false,
            loc,
            "must not have the form of a vow id",
            "value_error.uid",
        );
        return None;
    }
    Some(uid.into_string())
}

/// Checks a client-supplied secret (`whsec_…` as Svix's pattern has it, or a `whsk_` ed25519
/// key) and returns it normalised ([`crate::secret::normalise`]).
pub fn check_secret(p: &mut Problems, loc: &[&str], raw: &str) -> Option<String> {
    crate::secret::normalise(raw)
        .map_err(|msg| p.require(false, loc, &msg, "value_error.str.regex"))
        .ok()
}

/// `metadata` maps: string values only (serde enforces the type).
pub type Metadata = std::collections::BTreeMap<String, String>;
