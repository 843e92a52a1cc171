//! The Overview's stored delivery activity, one row per minute, as rows.

use super::read::{Columns, FromColumns, Reader};
use crate::overview::{Activity, ActivityMinute};

impl FromColumns for ActivityMinute {
    const COLUMNS: &'static str = "minute, succeeded, failed, delivered, dead_lettered, disabled";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(ActivityMinute {
            minute: r.time()?,
            activity: Activity {
                succeeded: r.int()?,
                failed: r.int()?,
                delivered: r.int()?,
                dead_lettered: r.int()?,
                disabled: r.int()?,
            },
        })
    }
}
