//! A result table's columns as bytes and back, for pickling: a version mark, then per column its
//! name, a type tag, its values (nullable ones: a presence byte before each) in little-endian,
//! strings with their length.

use leoguard_core::parquet::Column;

/// The encoding's mark and version: bytes of another encoding are refused, not misread.
const MAGIC: &[u8; 4] = b"LGT1";

fn put_len(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u64).to_le_bytes());
}

/// The columns as bytes.
pub fn encode(columns: &[(String, Column)]) -> Vec<u8> {
    fn fixed<T: Copy, const N: usize>(out: &mut Vec<u8>, tag: u8, v: &[T], bytes: impl Fn(T) -> [u8; N]) {
        out.push(tag);
        put_len(out, v.len());
        v.iter().for_each(|&x| out.extend_from_slice(&bytes(x)));
    }
    fn opt<T: Copy, const N: usize>(out: &mut Vec<u8>, tag: u8, v: &[Option<T>], bytes: impl Fn(T) -> [u8; N]) {
        out.push(tag);
        put_len(out, v.len());
        for x in v {
            out.push(u8::from(x.is_some()));
            if let Some(x) = x {
                out.extend_from_slice(&bytes(*x));
            }
        }
    }
    let mut out = MAGIC.to_vec();
    put_len(&mut out, columns.len());
    for (name, c) in columns {
        put_len(&mut out, name.len());
        out.extend_from_slice(name.as_bytes());
        match c {
            Column::Bool(v) => fixed(&mut out, 0, v, |x| [u8::from(x)]),
            Column::U16(v) => fixed(&mut out, 1, v, u16::to_le_bytes),
            Column::U32(v) => fixed(&mut out, 2, v, u32::to_le_bytes),
            Column::U64(v) => fixed(&mut out, 3, v, u64::to_le_bytes),
            Column::I64(v) => fixed(&mut out, 4, v, i64::to_le_bytes),
            Column::F64(v) => fixed(&mut out, 5, v, f64::to_le_bytes),
            Column::OptBool(v) => opt(&mut out, 6, v, |x| [u8::from(x)]),
            Column::OptU32(v) => opt(&mut out, 7, v, u32::to_le_bytes),
            Column::OptU64(v) => opt(&mut out, 8, v, u64::to_le_bytes),
            Column::OptI64(v) => opt(&mut out, 9, v, i64::to_le_bytes),
            Column::OptF64(v) => opt(&mut out, 10, v, f64::to_le_bytes),
            Column::Str(v) => {
                out.push(11);
                put_len(&mut out, v.len());
                for s in v {
                    out.push(u8::from(s.is_some()));
                    if let Some(s) = s {
                        put_len(&mut out, s.len());
                        out.extend_from_slice(s.as_bytes());
                    }
                }
            }
        }
    }
    out
}

/// Reads `encode`'s bytes; None if they are not such bytes.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
    fn len(&mut self) -> Option<usize> {
        usize::try_from(u64::from_le_bytes(self.take()?)).ok()
    }
    fn bytes(&mut self, n: usize) -> Option<&[u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }
    fn fixed<T, const N: usize>(&mut self, from: impl Fn([u8; N]) -> T) -> Option<Vec<T>> {
        let n = self.len()?;
        // A length beyond what is left is corrupt, not a reason to allocate.
        (n.checked_mul(N)? <= self.0.len()).then_some(())?;
        (0..n).map(|_| self.take().map(&from)).collect()
    }
    fn opt<T, const N: usize>(&mut self, from: impl Fn([u8; N]) -> T) -> Option<Vec<Option<T>>> {
        let n = self.len()?;
        (n <= self.0.len()).then_some(())?;
        (0..n)
            .map(|_| match self.take::<1>()?[0] {
                0 => Some(None),
                1 => self.take().map(&from).map(Some),
                _ => None,
            })
            .collect()
    }
}

/// The columns `encode` wrote, or None for bytes it did not write.
pub fn decode(state: &[u8]) -> Option<Vec<(String, Column)>> {
    let mut r = Reader(state.strip_prefix(MAGIC)?);
    let n = r.len()?;
    let mut out = Vec::new();
    for _ in 0..n {
        let len = r.len()?;
        let name = String::from_utf8(r.bytes(len)?.to_vec()).ok()?;
        let bool_of = |b: [u8; 1]| b[0] != 0;
        let c = match r.take::<1>()?[0] {
            0 => Column::Bool(r.fixed(bool_of)?),
            1 => Column::U16(r.fixed(u16::from_le_bytes)?),
            2 => Column::U32(r.fixed(u32::from_le_bytes)?),
            3 => Column::U64(r.fixed(u64::from_le_bytes)?),
            4 => Column::I64(r.fixed(i64::from_le_bytes)?),
            5 => Column::F64(r.fixed(f64::from_le_bytes)?),
            6 => Column::OptBool(r.opt(bool_of)?),
            7 => Column::OptU32(r.opt(u32::from_le_bytes)?),
            8 => Column::OptU64(r.opt(u64::from_le_bytes)?),
            9 => Column::OptI64(r.opt(i64::from_le_bytes)?),
            10 => Column::OptF64(r.opt(f64::from_le_bytes)?),
            11 => {
                let n = r.len()?;
                (n <= r.0.len()).then_some(())?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(match r.take::<1>()?[0] {
                        0 => None,
                        1 => {
                            let len = r.len()?;
                            Some(String::from_utf8(r.bytes(len)?.to_vec()).ok()?)
                        }
                        _ => return None,
                    });
                }
                Column::Str(v)
            }
            _ => return None,
        };
        out.push((name, c));
    }
    r.0.is_empty().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_column_comes_back_and_damage_is_refused() {
        let cols = vec![
            ("a".to_string(), Column::Bool(vec![true, false])),
            ("b".to_string(), Column::U16(vec![1, 65535])),
            ("c".to_string(), Column::U32(vec![0, 7])),
            ("d".to_string(), Column::U64(vec![u64::MAX, 3])),
            ("e".to_string(), Column::I64(vec![-1, 5])),
            ("f".to_string(), Column::F64(vec![0.1, f64::NAN])),
            ("g".to_string(), Column::OptBool(vec![None, Some(true)])),
            ("h".to_string(), Column::OptU32(vec![Some(1), None])),
            ("i".to_string(), Column::OptU64(vec![None, Some(2)])),
            ("j".to_string(), Column::OptI64(vec![Some(-3), None])),
            ("k".to_string(), Column::OptF64(vec![Some(1.5), None])),
            ("é".to_string(), Column::Str(vec![Some("x".into()), None])),
        ];
        let bytes = encode(&cols);
        let back = decode(&bytes).unwrap();
        // NaN != NaN: compare the encodings.
        assert_eq!(encode(&back), bytes);
        assert_eq!(back.len(), cols.len());
        assert!(matches!(&back[11].1, Column::Str(v) if v[0].as_deref() == Some("x") && v[1].is_none()));
        for cut in [0, 1, 8, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_none());
        assert!(decode(&[&MAGIC[..], &u64::MAX.to_le_bytes()].concat()).is_none());
        assert!(decode(&bytes[4..]).is_none(), "no mark, no table");
    }
}
