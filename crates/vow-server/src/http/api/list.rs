//! Pagination as every list operation takes it: [`ListParams`] (`limit`, `iterator`, `order`)
//! in, [`ListResponse`] out.

use serde::{Deserialize, Serialize};
use vow_core::IdError;
use vow_store::page::Page;
use vow_store::{Order, Seek};

use super::keys::id_error;
use crate::error::ApiResult;

/// `limit`, `iterator` and `order`, as every list operation takes them.
#[derive(Debug, Deserialize)]
pub struct ListParams {
    limit: Option<u64>,
    iterator: Option<String>,
    order: Option<Ordering>,
}

/// Svix's `Ordering`.
#[derive(Debug, Clone, Copy, Deserialize)]
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
