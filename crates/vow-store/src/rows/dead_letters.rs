//! The dead-letter alert's counts and raised alerts, as rows.

use super::read::{Columns, FromColumns, Reader};
use crate::dead_letters::{DeadLetterCount, RaisedAlert};

impl FromColumns for DeadLetterCount {
    const COLUMNS: &'static str = "app_id, endpoint_id, count";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(DeadLetterCount {
            app_id: r.parse()?,
            endpoint_id: r.parse()?,
            count: r.int()?,
        })
    }
}

impl FromColumns for RaisedAlert {
    const COLUMNS: &'static str = "app_id, endpoint_id, raised_at";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(RaisedAlert {
            app_id: r.parse()?,
            endpoint_id: r.parse()?,
            raised_at: r.time()?,
        })
    }
}
