//! Pagination as every list operation takes it: [`ListParams`] (`limit`, `iterator`, `order`)
//! in, [`ListResponse`] out.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use utoipa::__dev::ComposeSchema;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::ToSchema;
use vow_core::IdError;
use vow_store::page::Page;
use vow_store::{Order, Seek};

use super::keys::id_error;
use crate::error::ApiResult;

/// `limit`, `iterator` and `order`, as every list operation takes them.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// How many items to return (1-250, default 50; larger values are cut to 250).
    limit: Option<u64>,
    /// The `iterator` (or `prevIterator`) of the page before.
    iterator: Option<String>,
    /// Which way to page.
    order: Option<Ordering>,
}

/// Svix's `Ordering`.
#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Ordering {
    /// Oldest first.
    Ascending,
    /// Newest first.
    Descending,
}

const DEFAULT_LIMIT: u64 = 50;
const MAX_LIMIT: u64 = 250;

impl ListParams {
    /// The order asked for, or `default`.
    pub fn order(&self, default: Order) -> Order {
        match self.order {
            None => default,
            Some(Ordering::Ascending) => Order::Ascending,
            Some(Ordering::Descending) => Order::Descending,
        }
    }

    /// The seek for this page; `check` validates the iterator's key (without its `-`).
    pub fn seek(
        &self,
        order: Order,
        check: impl Fn(&str) -> Result<(), IdError>,
    ) -> ApiResult<Seek> {
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT) as usize;
        if let Some(it) = &self.iterator {
            check(it.strip_prefix('-').unwrap_or(it))
                .map_err(|e| id_error(&["query", "iterator"], e))?;
        }
        Ok(Seek::for_iterator(self.iterator.as_deref(), order, limit))
    }
}

/// Svix's `ListResponse_…Out_`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResponse<T> {
    data: Vec<T>,
    done: bool,
    iterator: Option<String>,
    prev_iterator: Option<String>,
}

/// Named as Svix names it (`ListResponse_ApplicationOut_`), one schema per item type.
impl<T: ToSchema> ToSchema for ListResponse<T> {
    fn name() -> Cow<'static, str> {
        Cow::Owned(format!("ListResponse_{}_", T::name()))
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((T::name().into_owned(), T::schema()));
        T::schemas(schemas);
    }
}

/// (utoipa composes a generic type's schema from its parameter's, handed over as a `$ref`.)
impl<T: ToSchema> ComposeSchema for ListResponse<T> {
    fn compose(generics: Vec<RefOr<Schema>>) -> RefOr<Schema> {
        let item = generics
            .into_iter()
            .next()
            .unwrap_or_else(|| Ref::from_schema_name(T::name()).into());
        let nullable_string =
            || ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::String, Type::Null]));
        ObjectBuilder::new()
            .property("data", ArrayBuilder::new().items(item))
            .property("done", ObjectBuilder::new().schema_type(Type::Boolean))
            .property("iterator", nullable_string())
            .property("prevIterator", nullable_string())
            .required("data")
            .required("done")
            .required("iterator")
            .into()
    }
}

impl<T> From<Page<T>> for ListResponse<T> {
    fn from(p: Page<T>) -> Self {
        Self {
            data: p.data,
            done: p.done,
            iterator: p.iterator,
            prev_iterator: p.prev_iterator,
        }
    }
}
