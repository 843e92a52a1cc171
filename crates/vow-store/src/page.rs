//! Keyset pagination.
//!
//! Backends implement one primitive, [`Seek`]: "up to `limit + 1` rows whose key is strictly
//! beyond `after`, in this direction". [`Page::build`] turns that into Svix's page shape
//! (`iterator` for the next page, `prevIterator` = `-<key>` for the previous one, `done`), so the
//! cursor logic lives once, here, and not in each backend.

/// Sort order of a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Oldest (smallest key) first.
    #[default]
    Ascending,
    /// Newest (largest key) first.
    Descending,
}

impl Order {
    /// The other direction.
    pub fn reversed(self) -> Self {
        match self {
            Order::Ascending => Order::Descending,
            Order::Descending => Order::Ascending,
        }
    }

    /// As SQL: how a key compares to the seek's `after` to be beyond it, and the `ORDER BY`
    /// direction (`(">", "ASC")` or `("<", "DESC")`).
    pub fn sql(self) -> (&'static str, &'static str) {
        match self {
            Order::Ascending => (">", "ASC"),
            Order::Descending => ("<", "DESC"),
        }
    }
}

/// What a backend fetches for a listing: at most `limit + 1` rows ordered by key in `order`,
/// only those strictly after `after` in that order (`key > after` ascending, `key < after`
/// descending). The extra row tells whether another page follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seek {
    /// Exclusive starting key.
    pub after: Option<String>,
    /// Direction.
    pub order: Order,
    /// Page size (the backend fetches one more).
    pub limit: usize,
}

impl Seek {
    /// How many rows the backend should fetch.
    pub fn fetch(&self) -> i64 {
        i64::try_from(self.limit).unwrap_or(i64::MAX - 1) + 1
    }

    /// The seek for a page requested with `iterator` (`None`, `key`, or `-key` for the
    /// previous page) in `order`.
    pub fn for_iterator(iterator: Option<&str>, order: Order, limit: usize) -> Self {
        match iterator {
            Some(it) if it.starts_with('-') => Seek {
                after: Some(it[1..].to_string()),
                order: order.reversed(),
                limit,
            },
            Some(it) => Seek {
                after: Some(it.to_string()),
                order,
                limit,
            },
            None => Seek {
                after: None,
                order,
                limit,
            },
        }
    }
}

/// One page of a listing, in Svix's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The items, in the requested order.
    pub data: Vec<T>,
    /// No more items beyond this page in the direction travelled.
    pub done: bool,
    /// Cursor for the next page (the last item's key).
    pub iterator: Option<String>,
    /// Cursor for the previous page (`-` + the first item's key).
    pub prev_iterator: Option<String>,
}

impl<T> Page<T> {
    /// Builds a page from the rows a backend returned for `seek`, which was derived by
    /// [`Seek::for_iterator`] from `iterator` and `order`.
    pub fn build(mut rows: Vec<T>, seek: &Seek, order: Order, key: impl Fn(&T) -> String) -> Self {
        let done = rows.len() <= seek.limit;
        rows.truncate(seek.limit);
        if seek.order != order {
            rows.reverse();
        }
        let iterator = rows.last().map(&key);
        let prev_iterator = rows.first().map(|r| format!("-{}", key(r)));
        Page {
            data: rows,
            done,
            iterator,
            prev_iterator,
        }
    }

    /// Maps the items with a function that can fail; the first error wins.
    pub fn try_map<U, E>(self, f: impl FnMut(T) -> Result<U, E>) -> Result<Page<U>, E> {
        Ok(Page {
            data: self.data.into_iter().map(f).collect::<Result<_, E>>()?,
            done: self.done,
            iterator: self.iterator,
            prev_iterator: self.prev_iterator,
        })
    }

    /// Maps the items.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            data: self.data.into_iter().map(f).collect(),
            done: self.done,
            iterator: self.iterator,
            prev_iterator: self.prev_iterator,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetch(all: &[i32], seek: &Seek) -> Vec<i32> {
        let mut v: Vec<i32> = all
            .iter()
            .copied()
            .filter(|x| match (&seek.after, seek.order) {
                (None, _) => true,
                (Some(a), Order::Ascending) => *x > a.parse().unwrap(),
                (Some(a), Order::Descending) => *x < a.parse().unwrap(),
            })
            .collect();
        if seek.order == Order::Descending {
            v.reverse();
        }
        v.truncate(seek.limit + 1);
        v
    }

    #[test]
    fn iterating_forward_then_back_visits_the_same_pages() {
        let all: Vec<i32> = (10..17).collect();
        let s1 = Seek::for_iterator(None, Order::Ascending, 3);
        let p1 = Page::build(fetch(&all, &s1), &s1, Order::Ascending, |x| x.to_string());
        assert_eq!(p1.data, vec![10, 11, 12]);
        assert!(!p1.done);
        let s2 = Seek::for_iterator(p1.iterator.as_deref(), Order::Ascending, 3);
        let p2 = Page::build(fetch(&all, &s2), &s2, Order::Ascending, |x| x.to_string());
        assert_eq!(p2.data, vec![13, 14, 15]);
        let s3 = Seek::for_iterator(p2.iterator.as_deref(), Order::Ascending, 3);
        let p3 = Page::build(fetch(&all, &s3), &s3, Order::Ascending, |x| x.to_string());
        assert_eq!(p3.data, vec![16]);
        assert!(p3.done);
        let back = Seek::for_iterator(p3.prev_iterator.as_deref(), Order::Ascending, 3);
        let pb = Page::build(fetch(&all, &back), &back, Order::Ascending, |x| {
            x.to_string()
        });
        assert_eq!(pb.data, vec![13, 14, 15]);
    }

    #[test]
    fn descending_pages_start_with_the_newest() {
        let all: Vec<i32> = (1..=5).collect();
        let s = Seek::for_iterator(None, Order::Descending, 2);
        let p = Page::build(fetch(&all, &s), &s, Order::Descending, |x| x.to_string());
        assert_eq!(p.data, vec![5, 4]);
        assert_eq!(p.iterator.as_deref(), Some("4"));
    }
}
