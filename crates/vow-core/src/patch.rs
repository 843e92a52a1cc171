//! The three states of a field in a PATCH body.
//!
//! JSON merge semantics need to tell "leave it" (field absent) from "clear it" (`null`) from "set
//! it" (a value). `Option<Option<T>>` can carry that but reads badly; [`Patch`] names the states.
//! Use it with `#[serde(default)]` so an absent field deserializes to [`Patch::Absent`].

use serde::{Deserialize, Deserializer};

/// A PATCH field: absent (keep), null (clear), or a new value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Patch<T> {
    /// The field was not in the body: keep the stored value.
    #[default]
    Absent,
    /// The field was `null`: clear the stored value.
    Null,
    /// The field has a new value.
    Value(T),
}

impl<T> Patch<T> {
    /// Applies the patch to a nullable stored value.
    pub fn apply_to(self, current: Option<T>) -> Option<T> {
        match self {
            Patch::Absent => current,
            Patch::Null => None,
            Patch::Value(v) => Some(v),
        }
    }

    /// Maps the value, keeping absent and null.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Patch<U> {
        match self {
            Patch::Absent => Patch::Absent,
            Patch::Null => Patch::Null,
            Patch::Value(v) => Patch::Value(f(v)),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            None => Patch::Null,
            Some(v) => Patch::Value(v),
        })
    }
}

/// What the wire carries: the field may be absent, `null`, or a `T`. (utoipa composes a generic
/// type's schema from its parameter's, which the caller hands over: a `$ref` for a named one.)
#[cfg(feature = "utoipa")]
impl<T: utoipa::PartialSchema> utoipa::__dev::ComposeSchema for Patch<T> {
    fn compose(
        generics: Vec<utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>>,
    ) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        let value = generics.into_iter().next().unwrap_or_else(T::schema);
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::Null))
            .item(value)
            .into()
    }
}

#[cfg(feature = "utoipa")]
impl<T: utoipa::ToSchema> utoipa::ToSchema for Patch<T> {
    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        T::schemas(schemas);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Body {
        #[serde(default)]
        uid: Patch<String>,
    }

    #[test]
    fn absent_null_and_value_are_told_apart() {
        let absent: Body = serde_json::from_str("{}").unwrap();
        let null: Body = serde_json::from_str(r#"{"uid":null}"#).unwrap();
        let value: Body = serde_json::from_str(r#"{"uid":"x"}"#).unwrap();
        assert_eq!(absent.uid, Patch::Absent);
        assert_eq!(null.uid, Patch::Null);
        assert_eq!(value.uid, Patch::Value("x".into()));
        assert_eq!(Patch::<i32>::Absent.apply_to(Some(1)), Some(1));
        assert_eq!(Patch::<i32>::Null.apply_to(Some(1)), None);
        assert_eq!(Patch::Value(2).apply_to(Some(1)), Some(2));
    }
}
