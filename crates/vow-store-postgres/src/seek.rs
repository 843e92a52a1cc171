//! Keyset pagination as SQL: the [`Seek`] primitive of `vow_store::page`.
//!
//! A listing fetches at most `limit + 1` rows ordered by its key (`id`, or `name` for event
//! types) in the seek's direction, only those strictly beyond `after` (`key > after` ascending,
//! `key < after` descending). Keys are `COLLATE "C"` in the schema, so the order is byte order on
//! every database, and the `(app_id, id)` indexes serve both directions.

use sqlx::{Postgres, QueryBuilder};
use vow_store::Seek;

/// Appends ` AND key <cmp> $after ORDER BY key <dir> LIMIT $fetch` to a query that already has a
/// `WHERE` clause. `key` is a trusted column name, never input.
pub(crate) fn push_seek(qb: &mut QueryBuilder<'_, Postgres>, key: &'static str, seek: &Seek) {
    let (cmp, dir) = seek.order.sql();
    if let Some(after) = &seek.after {
        qb.push(format_args!(" AND {key} {cmp} "))
            .push_bind(after.clone());
    }
    qb.push(format_args!(" ORDER BY {key} {dir} LIMIT "))
        .push_bind(seek.fetch());
}

#[cfg(test)]
mod tests {
    use super::*;
    use vow_store::Order;

    fn sql(seek: &Seek) -> String {
        let mut qb = QueryBuilder::<Postgres>::new("SELECT id FROM t WHERE TRUE");
        push_seek(&mut qb, "id", seek);
        qb.into_sql()
    }

    #[test]
    fn a_first_page_has_no_key_condition() {
        let s = Seek::for_iterator(None, Order::Descending, 10);
        assert_eq!(
            sql(&s),
            "SELECT id FROM t WHERE TRUE ORDER BY id DESC LIMIT $1"
        );
    }

    #[test]
    fn a_previous_page_seeks_the_other_way() {
        let s = Seek::for_iterator(Some("-app_1"), Order::Ascending, 10);
        assert_eq!(
            sql(&s),
            "SELECT id FROM t WHERE TRUE AND id < $1 ORDER BY id DESC LIMIT $2"
        );
    }
}
