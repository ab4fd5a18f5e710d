//! The Thrift compact protocol (Apache Thrift's `TCompactProtocol`), as much of it as a Parquet
//! file's metadata needs: varints, zigzag integers, field headers with id deltas, lists, structs.

pub(super) fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The Thrift compact protocol, as much of it as the file's metadata needs: fields are written in
/// increasing id order within each struct, so each header carries the id's delta.
#[derive(Default)]
pub(super) struct Compact {
    pub(super) buf: Vec<u8>,
    last: Vec<i16>,
    current: i16,
}

const CT_TRUE: u8 = 1;
const CT_FALSE: u8 = 2;
const CT_BYTE: u8 = 3;
const CT_I32: u8 = 5;
const CT_I64: u8 = 6;
pub(super) const CT_BINARY: u8 = 8;
const CT_LIST: u8 = 9;
pub(super) const CT_STRUCT: u8 = 12;

impl Compact {
    pub(super) fn field(&mut self, id: i16, ty: u8) {
        let delta = id - self.current;
        if (1..=15).contains(&delta) {
            self.buf.push(((delta as u8) << 4) | ty);
        } else {
            self.buf.push(ty);
            varint(zigzag(i64::from(id)), &mut self.buf);
        }
        self.current = id;
    }
    pub(super) fn i8(&mut self, id: i16, v: i8) {
        self.field(id, CT_BYTE);
        self.buf.push(v as u8);
    }
    pub(super) fn bool(&mut self, id: i16, v: bool) {
        self.field(id, if v { CT_TRUE } else { CT_FALSE });
    }
    pub(super) fn i32(&mut self, id: i16, v: i32) {
        self.field(id, CT_I32);
        varint(zigzag(i64::from(v)), &mut self.buf);
    }
    pub(super) fn i64(&mut self, id: i16, v: i64) {
        self.field(id, CT_I64);
        varint(zigzag(v), &mut self.buf);
    }
    pub(super) fn string(&mut self, id: i16, s: &str) {
        self.field(id, CT_BINARY);
        self.elem_string(s);
    }
    pub(super) fn elem_string(&mut self, s: &str) {
        varint(s.len() as u64, &mut self.buf);
        self.buf.extend_from_slice(s.as_bytes());
    }
    pub(super) fn list_header(&mut self, n: usize, elem: u8) {
        if n < 15 {
            self.buf.push(((n as u8) << 4) | elem);
        } else {
            self.buf.push(0xf0 | elem);
            varint(n as u64, &mut self.buf);
        }
    }
    /// A list of `n` elements of compact type `elem` follows (structs: `elem_struct` ... `end_struct`).
    pub(super) fn list_begin(&mut self, id: i16, n: usize, elem: u8) {
        self.field(id, CT_LIST);
        self.list_header(n, elem);
    }
    pub(super) fn list_begin_i32(&mut self, id: i16, v: &[i32]) {
        self.field(id, CT_LIST);
        self.list_header(v.len(), CT_I32);
        for &x in v {
            varint(zigzag(i64::from(x)), &mut self.buf);
        }
    }
    pub(super) fn begin_struct(&mut self, id: i16) {
        self.field(id, CT_STRUCT);
        self.elem_struct();
    }
    pub(super) fn elem_struct(&mut self) {
        self.last.push(self.current);
        self.current = 0;
    }
    pub(super) fn end_struct(&mut self) {
        self.buf.push(0);
        self.current = self.last.pop().unwrap_or(0);
    }
    pub(super) fn stop(&mut self) {
        self.buf.push(0);
    }
}

/// The length of `varint(v)`.
pub(super) fn varint_len(v: u64) -> usize {
    (64 - v.max(1).leading_zeros() as usize).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thrift_compact_encodings_match_the_spec() {
        let mut v = Vec::new();
        varint(300, &mut v);
        assert_eq!(v, [0xac, 0x02]);
        assert_eq!([zigzag(0), zigzag(-1), zigzag(1), zigzag(-2)], [0, 1, 2, 3]);
        let mut c = Compact::default();
        c.i32(1, 3); // delta 1, i32, zigzag(3) = 6
        c.i64(20, -1); // delta 19: long form, id zigzag 40
        c.bool(21, true);
        c.begin_struct(22);
        c.i8(1, 7);
        c.end_struct();
        c.stop();
        assert_eq!(c.buf, [0x15, 6, 0x06, 40, 1, 0x11, 0x1c, 0x13, 7, 0, 0]);
    }
}
