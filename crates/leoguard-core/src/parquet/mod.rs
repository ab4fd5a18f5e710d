//! A minimal Parquet writer for result tables: flat columns of booleans, integers, doubles and
//! strings, each required or nullable, in one row group, plain-encoded, uncompressed or with a
//! codec the caller brings (leoguard's Python module compresses with zstd).
//!
//! The Python side hands a run's tables to polars as these bytes (`pl.read_parquet`), so a run's
//! results need no numpy, and writes them to disk without polars. The file follows the Apache
//! Parquet format (parquet-format's `parquet.thrift`, Thrift compact protocol): "PAR1", each
//! column's data pages (v1) of at most `PAGE_ROWS` rows, the file metadata, its length and "PAR1".
//! Unsigned columns carry both the INTEGER logical type and the legacy converted type, so readers
//! map them to UInt16/UInt32/UInt64 and not to signed integers; strings carry STRING and UTF8.

mod compact;

use compact::{varint, varint_len, Compact, CT_BINARY, CT_STRUCT};
use std::ops::Range;

/// A column's values; `None` in an `Opt*` variant (and in `Str`) is a null.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    /// Booleans.
    Bool(Vec<bool>),
    /// Unsigned 16-bit integers.
    U16(Vec<u16>),
    /// Unsigned 32-bit integers.
    U32(Vec<u32>),
    /// Unsigned 64-bit integers.
    U64(Vec<u64>),
    /// Signed 64-bit integers.
    I64(Vec<i64>),
    /// Doubles.
    F64(Vec<f64>),
    /// Nullable booleans.
    OptBool(Vec<Option<bool>>),
    /// Nullable unsigned 32-bit integers.
    OptU32(Vec<Option<u32>>),
    /// Nullable unsigned 64-bit integers.
    OptU64(Vec<Option<u64>>),
    /// Nullable signed 64-bit integers.
    OptI64(Vec<Option<i64>>),
    /// Nullable doubles.
    OptF64(Vec<Option<f64>>),
    /// Nullable UTF-8 strings.
    Str(Vec<Option<String>>),
}

/// A page compressor: the codec's id in parquet.thrift's `CompressionCodec` and the function that
/// compresses one page's data.
pub struct Codec<'a> {
    /// `CODEC_ZSTD`, ...
    pub id: i32,
    /// Compresses a page's data.
    pub compress: &'a mut dyn FnMut(&[u8]) -> std::io::Result<Vec<u8>>,
}

/// parquet.thrift's `CompressionCodec.ZSTD`.
pub const CODEC_ZSTD: i32 = 6;

/// Why a table cannot be written.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParquetError {
    /// Columns of one table differ in length.
    #[error("column {name} has {len} values where the table has {rows}")]
    Ragged {
        /// The column.
        name: String,
        /// Its values.
        len: usize,
        /// The first column's values.
        rows: usize,
    },
    /// Two columns share a name.
    #[error("two columns are named {0}")]
    Duplicate(String),
    /// A page's data is beyond Parquet's 32-bit page sizes (long strings).
    #[error("a page of {0} bytes is beyond Parquet's 2 GiB page limit")]
    PageTooLarge(usize),
    /// The codec failed to compress a page.
    #[error("compressing a page failed: {0}")]
    Codec(String),
}

// parquet.thrift's enums, as far as this writer uses them.
const TYPE_BOOLEAN: i32 = 0;
const TYPE_INT32: i32 = 1;
const TYPE_INT64: i32 = 2;
const TYPE_DOUBLE: i32 = 5;
const TYPE_BYTE_ARRAY: i32 = 6;
const CONVERTED_UTF8: i32 = 0;
const REQUIRED: i32 = 0;
const OPTIONAL: i32 = 1;
const ENCODING_PLAIN: i32 = 0;
const ENCODING_RLE: i32 = 3;
const PAGE_DATA: i32 = 0;
const CONVERTED_UINT_16: i32 = 12;
const CONVERTED_UINT_32: i32 = 13;
const CONVERTED_UINT_64: i32 = 14;

impl Column {
    /// Its values (rows).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        match self {
            Column::Bool(v) => v.len(),
            Column::U16(v) => v.len(),
            Column::U32(v) => v.len(),
            Column::U64(v) => v.len(),
            Column::I64(v) => v.len(),
            Column::F64(v) => v.len(),
            Column::OptBool(v) => v.len(),
            Column::OptU32(v) => v.len(),
            Column::OptU64(v) => v.len(),
            Column::OptI64(v) => v.len(),
            Column::OptF64(v) => v.len(),
            Column::Str(v) => v.len(),
        }
    }

    /// Physical type, and its annotation (unsigned width or string) for the logical type.
    fn physical(&self) -> (i32, Annotation) {
        match self {
            Column::Bool(_) | Column::OptBool(_) => (TYPE_BOOLEAN, Annotation::None),
            Column::U16(_) => (TYPE_INT32, Annotation::Unsigned(16, CONVERTED_UINT_16)),
            Column::U32(_) | Column::OptU32(_) => (TYPE_INT32, Annotation::Unsigned(32, CONVERTED_UINT_32)),
            Column::U64(_) | Column::OptU64(_) => (TYPE_INT64, Annotation::Unsigned(64, CONVERTED_UINT_64)),
            Column::I64(_) | Column::OptI64(_) => (TYPE_INT64, Annotation::None),
            Column::F64(_) | Column::OptF64(_) => (TYPE_DOUBLE, Annotation::None),
            Column::Str(_) => (TYPE_BYTE_ARRAY, Annotation::String),
        }
    }

    fn nullable(&self) -> bool {
        !matches!(
            self,
            Column::Bool(_) | Column::U16(_) | Column::U32(_) | Column::U64(_) | Column::I64(_) | Column::F64(_)
        )
    }

    /// Rows `r` of the column: one page's values.
    fn slice(&self, r: Range<usize>) -> Slice<'_> {
        match self {
            Column::Bool(v) => Slice::Bool(&v[r]),
            Column::U16(v) => Slice::U16(&v[r]),
            Column::U32(v) => Slice::U32(&v[r]),
            Column::U64(v) => Slice::U64(&v[r]),
            Column::I64(v) => Slice::I64(&v[r]),
            Column::F64(v) => Slice::F64(&v[r]),
            Column::OptBool(v) => Slice::OptBool(&v[r]),
            Column::OptU32(v) => Slice::OptU32(&v[r]),
            Column::OptU64(v) => Slice::OptU64(&v[r]),
            Column::OptI64(v) => Slice::OptI64(&v[r]),
            Column::OptF64(v) => Slice::OptF64(&v[r]),
            Column::Str(v) => Slice::Str(&v[r]),
        }
    }
}

/// What a column's schema element says beyond its physical type.
enum Annotation {
    None,
    /// INTEGER(bits, unsigned) and the legacy converted type.
    Unsigned(i8, i32),
    /// STRING and the legacy UTF8.
    String,
}

/// One page's values of a column.
enum Slice<'a> {
    Bool(&'a [bool]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
    I64(&'a [i64]),
    F64(&'a [f64]),
    OptBool(&'a [Option<bool>]),
    OptU32(&'a [Option<u32>]),
    OptU64(&'a [Option<u64>]),
    OptI64(&'a [Option<i64>]),
    OptF64(&'a [Option<f64>]),
    Str(&'a [Option<String>]),
}

impl Slice<'_> {
    /// The length of the page's data (`write_page_data`).
    fn page_len(&self) -> usize {
        let levels = |n: usize| 4 + varint_len(((n.div_ceil(8) as u64) << 1) | 1) + n.div_ceil(8);
        match self {
            Slice::Bool(v) => v.len().div_ceil(8),
            Slice::U16(v) => 4 * v.len(),
            Slice::U32(v) => 4 * v.len(),
            Slice::U64(v) => 8 * v.len(),
            Slice::I64(v) => 8 * v.len(),
            Slice::F64(v) => 8 * v.len(),
            Slice::OptBool(v) => levels(v.len()) + v.iter().flatten().count().div_ceil(8),
            Slice::OptU32(v) => levels(v.len()) + 4 * v.iter().flatten().count(),
            Slice::OptU64(v) => levels(v.len()) + 8 * v.iter().flatten().count(),
            Slice::OptI64(v) => levels(v.len()) + 8 * v.iter().flatten().count(),
            Slice::OptF64(v) => levels(v.len()) + 8 * v.iter().flatten().count(),
            Slice::Str(v) => levels(v.len()) + v.iter().flatten().map(|s| 4 + s.len()).sum::<usize>(),
        }
    }

    /// The page's data into `out` (exactly `page_len` bytes, zeroed): definition levels (nullable
    /// columns) then the non-null values, plain.
    fn write_page_data(&self, out: &mut [u8]) {
        fn put<const N: usize>(out: &mut [u8], values: impl Iterator<Item = [u8; N]>) {
            for (dst, v) in out.chunks_exact_mut(N).zip(values) {
                dst.copy_from_slice(&v);
            }
        }
        fn bits(out: &mut [u8], values: impl Iterator<Item = bool>) {
            for (i, b) in values.enumerate() {
                out[i / 8] |= u8::from(b) << (i % 8);
            }
        }
        fn opt<T: Copy, const N: usize>(out: &mut [u8], v: &[Option<T>], bytes: impl Fn(T) -> [u8; N]) {
            let at = def_levels(v.iter().map(Option::is_some), v.len(), out);
            put(&mut out[at..], v.iter().flatten().map(|&x| bytes(x)));
        }
        match self {
            Slice::Bool(v) => bits(out, v.iter().copied()),
            // INT32 holds an unsigned value's bits (parquet-format LogicalTypes.md, "INT").
            Slice::U16(v) => put(out, v.iter().map(|&x| u32::from(x).to_le_bytes())),
            Slice::U32(v) => put(out, v.iter().map(|x| x.to_le_bytes())),
            Slice::U64(v) => put(out, v.iter().map(|x| x.to_le_bytes())),
            Slice::I64(v) => put(out, v.iter().map(|x| x.to_le_bytes())),
            Slice::F64(v) => put(out, v.iter().map(|x| x.to_le_bytes())),
            Slice::OptBool(v) => {
                let at = def_levels(v.iter().map(Option::is_some), v.len(), out);
                bits(&mut out[at..], v.iter().flatten().copied());
            }
            Slice::OptU32(v) => opt(out, v, u32::to_le_bytes),
            Slice::OptU64(v) => opt(out, v, u64::to_le_bytes),
            Slice::OptI64(v) => opt(out, v, i64::to_le_bytes),
            Slice::OptF64(v) => opt(out, v, f64::to_le_bytes),
            Slice::Str(v) => {
                // BYTE_ARRAY, plain: each value's length (4 bytes, little-endian) then its bytes.
                let mut at = def_levels(v.iter().map(Option::is_some), v.len(), out);
                for s in v.iter().flatten() {
                    out[at..at + 4].copy_from_slice(&(s.len() as u32).to_le_bytes());
                    out[at + 4..at + 4 + s.len()].copy_from_slice(s.as_bytes());
                    at += 4 + s.len();
                }
            }
        }
    }
}

/// Definition levels of a flat nullable column (bit width 1) in the RLE/bit-packing hybrid: one
/// bit-packed run of all values, prefixed by its length in bytes (data page v1).
fn def_levels(present: impl Iterator<Item = bool>, n: usize, out: &mut [u8]) -> usize {
    let groups = n.div_ceil(8);
    let mut header = Vec::with_capacity(10);
    varint(((groups as u64) << 1) | 1, &mut header);
    out[..4].copy_from_slice(&((header.len() + groups) as u32).to_le_bytes());
    out[4..4 + header.len()].copy_from_slice(&header);
    let start = 4 + header.len();
    for (i, p) in present.enumerate() {
        out[start + i / 8] |= u8::from(p) << (i % 8);
    }
    start + groups
}

/// A table laid out as a Parquet file: its length is known before it is written, so a caller can
/// write it straight into memory it owns (the Python bytes object of `leoguard._core`).
pub struct Table<'a, N: AsRef<str> = &'a str> {
    columns: &'a [(N, Column)],
    /// Every page in file order: its column, its rows, its header and its data's length.
    pages: Vec<Page>,
    /// The file metadata (Thrift).
    footer: Vec<u8>,
}

/// One data page of a table.
struct Page {
    column: usize,
    rows: Range<usize>,
    header: Vec<u8>,
    len: usize,
}

/// One column chunk's place in the file: name, physical type, first page's offset, and its size
/// uncompressed and as stored (pages' headers included).
struct Chunk<'a> {
    name: &'a str,
    ty: i32,
    offset: i64,
    uncompressed: i64,
    stored: i64,
}

/// Rows per data page: pages stay far below Parquet's 32-bit page sizes whatever the table's length,
/// and readers can decode a column's pages in parallel.
pub const PAGE_ROWS: usize = 1 << 16;

impl<'a, N: AsRef<str>> Table<'a, N> {
    /// Checks the columns (same length, distinct names) and lays the file out in pages of
    /// `PAGE_ROWS` rows.
    pub fn new(columns: &'a [(N, Column)]) -> Result<Self, ParquetError> {
        Self::with_page_rows(columns, PAGE_ROWS)
    }

    fn with_page_rows(columns: &'a [(N, Column)], page_rows: usize) -> Result<Self, ParquetError> {
        let rows = check(columns, page_rows)?;
        let mut pages = Vec::new();
        let mut chunks = Vec::with_capacity(columns.len());
        let mut offset = 4i64;
        for (i, (name, c)) in columns.iter().enumerate().filter(|_| rows > 0) {
            let start = offset;
            for first in (0..rows).step_by(page_rows) {
                let r = first..rows.min(first + page_rows);
                let len = c.slice(r.clone()).page_len();
                let header = page_header(len, len, r.len())?;
                offset += (header.len() + len) as i64;
                pages.push(Page { column: i, rows: r, header, len });
            }
            let size = offset - start;
            chunks.push(Chunk {
                name: name.as_ref(),
                ty: c.physical().0,
                offset: start,
                uncompressed: size,
                stored: size,
            });
        }
        let footer = footer(columns, rows, &chunks, 0);
        Ok(Table { columns, pages, footer })
    }

    /// The file's length in bytes.
    pub fn file_len(&self) -> usize {
        4 + self.pages.iter().map(|p| p.header.len() + p.len).sum::<usize>() + self.footer.len() + 8
    }

    /// Writes the file into `out`, `file_len()` bytes, all zero.
    pub fn write(&self, out: &mut [u8]) {
        assert_eq!(out.len(), self.file_len(), "a Parquet table is written into exactly its length");
        out[..4].copy_from_slice(b"PAR1");
        let mut at = 4;
        for p in &self.pages {
            out[at..at + p.header.len()].copy_from_slice(&p.header);
            at += p.header.len();
            self.columns[p.column].1.slice(p.rows.clone()).write_page_data(&mut out[at..at + p.len]);
            at += p.len;
        }
        out[at..at + self.footer.len()].copy_from_slice(&self.footer);
        at += self.footer.len();
        out[at..at + 4].copy_from_slice(&(self.footer.len() as u32).to_le_bytes());
        out[at + 4..].copy_from_slice(b"PAR1");
    }
}

/// The Parquet file of a table whose pages `codec` compresses (a page that would grow is still
/// stored compressed: the codec applies to the whole column chunk).
pub fn compressed<N: AsRef<str>>(columns: &[(N, Column)], codec: Codec<'_>) -> Result<Vec<u8>, ParquetError> {
    let rows = check(columns, PAGE_ROWS)?;
    let mut out = b"PAR1".to_vec();
    let mut chunks = Vec::with_capacity(columns.len());
    let mut raw = Vec::new();
    for (name, c) in columns.iter().filter(|_| rows > 0) {
        let start = out.len() as i64;
        let mut uncompressed = 0i64;
        for first in (0..rows).step_by(PAGE_ROWS) {
            let r = first..rows.min(first + PAGE_ROWS);
            let page = c.slice(r.clone());
            raw.clear();
            raw.resize(page.page_len(), 0);
            page.write_page_data(&mut raw);
            let body = (codec.compress)(&raw).map_err(|e| ParquetError::Codec(e.to_string()))?;
            let header = page_header(raw.len(), body.len(), r.len())?;
            uncompressed += (header.len() + raw.len()) as i64;
            out.extend_from_slice(&header);
            out.extend_from_slice(&body);
        }
        let stored = out.len() as i64 - start;
        chunks.push(Chunk { name: name.as_ref(), ty: c.physical().0, offset: start, uncompressed, stored });
    }
    let footer = footer(columns, rows, &chunks, codec.id);
    out.extend_from_slice(&footer);
    out.extend_from_slice(&(footer.len() as u32).to_le_bytes());
    out.extend_from_slice(b"PAR1");
    Ok(out)
}

/// The table's rows, once its columns are checked: same length, distinct names.
fn check<N: AsRef<str>>(columns: &[(N, Column)], page_rows: usize) -> Result<usize, ParquetError> {
    // A page of at most PAGE_ROWS values of 8 bytes, plus its levels, fits Parquet's i32 sizes.
    assert!((1..=PAGE_ROWS).contains(&page_rows), "pages of 1 to PAGE_ROWS rows");
    let rows = columns.first().map_or(0, |(_, c)| c.len());
    for (i, (name, c)) in columns.iter().enumerate() {
        if c.len() != rows {
            return Err(ParquetError::Ragged { name: name.as_ref().to_string(), len: c.len(), rows });
        }
        if columns[..i].iter().any(|(other, _)| other.as_ref() == name.as_ref()) {
            return Err(ParquetError::Duplicate(name.as_ref().to_string()));
        }
    }
    Ok(rows)
}

/// A data page's header (v1): its sizes, uncompressed and as stored, and its values.
fn page_header(uncompressed: usize, stored: usize, values: usize) -> Result<Vec<u8>, ParquetError> {
    let size = |n: usize| i32::try_from(n).map_err(|_| ParquetError::PageTooLarge(n));
    let mut header = Compact::default();
    header.i32(1, PAGE_DATA);
    header.i32(2, size(uncompressed)?);
    header.i32(3, size(stored)?);
    header.begin_struct(5);
    header.i32(1, values as i32);
    header.i32(2, ENCODING_PLAIN);
    header.i32(3, ENCODING_RLE);
    header.i32(4, ENCODING_RLE);
    header.end_struct();
    header.stop();
    Ok(header.buf)
}

/// The file metadata: the schema (a root, then one leaf per column), the rows and the row group.
fn footer<N: AsRef<str>>(columns: &[(N, Column)], rows: usize, chunks: &[Chunk<'_>], codec: i32) -> Vec<u8> {
    let mut m = Compact::default();
    m.i32(1, 1); // version
    m.list_begin(2, columns.len() + 1, CT_STRUCT);
    m.elem_struct();
    m.string(4, "schema");
    m.i32(5, columns.len() as i32);
    m.end_struct();
    for (name, c) in columns {
        let (ty, annotation) = c.physical();
        m.elem_struct();
        m.i32(1, ty);
        m.i32(3, if c.nullable() { OPTIONAL } else { REQUIRED });
        m.string(4, name.as_ref());
        match annotation {
            Annotation::None => {}
            Annotation::Unsigned(bits, converted) => {
                m.i32(6, converted);
                m.begin_struct(10); // LogicalType (a union): INTEGER is field 10
                m.begin_struct(10);
                m.i8(1, bits);
                m.bool(2, false);
                m.end_struct();
                m.end_struct();
            }
            Annotation::String => {
                m.i32(6, CONVERTED_UTF8);
                m.begin_struct(10); // LogicalType: STRING is field 1, an empty struct
                m.begin_struct(1);
                m.end_struct();
                m.end_struct();
            }
        }
        m.end_struct();
    }
    m.i64(3, rows as i64);
    // A table without rows has no row group and no pages.
    m.list_begin(4, usize::from(rows > 0), CT_STRUCT);
    if rows > 0 {
        row_group(&mut m, chunks, rows, codec);
    }
    m.string(6, "leoguard");
    m.stop();
    m.buf
}

/// The file's one row group: a column chunk per column (its name, type, codec, page offset, sizes).
fn row_group(m: &mut Compact, chunks: &[Chunk<'_>], rows: usize, codec: i32) {
    m.elem_struct();
    m.list_begin(1, chunks.len(), CT_STRUCT);
    for c in chunks {
        m.elem_struct(); // ColumnChunk
        m.i64(2, c.offset);
        m.begin_struct(3); // ColumnMetaData
        m.i32(1, c.ty);
        m.list_begin_i32(2, &[ENCODING_PLAIN, ENCODING_RLE]);
        m.list_begin(3, 1, CT_BINARY);
        m.elem_string(c.name);
        m.i32(4, codec);
        m.i64(5, rows as i64);
        m.i64(6, c.uncompressed);
        m.i64(7, c.stored);
        m.i64(9, c.offset);
        m.end_struct();
        m.end_struct();
    }
    m.i64(2, chunks.iter().map(|c| c.uncompressed).sum());
    m.i64(3, rows as i64);
    m.end_struct();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Parquet file of a table.
    fn write_table(columns: &[(&str, Column)]) -> Result<Vec<u8>, ParquetError> {
        let t = Table::new(columns)?;
        let mut file = vec![0; t.file_len()];
        t.write(&mut file);
        Ok(file)
    }

    #[test]
    fn definition_levels_are_one_bit_packed_run() {
        let mut out = [0u8; 7];
        let present = [true, false, true, true, false, false, false, false, true];
        assert_eq!(def_levels(present.into_iter(), present.len(), &mut out), 7);
        // 2 groups: header (2 << 1) | 1 = 5, then the bits LSB first; prefixed by the length 3.
        assert_eq!(out, [3, 0, 0, 0, 5, 0b0000_1101, 0b0000_0001]);
    }

    #[test]
    fn a_file_is_framed_and_its_pages_hold_the_values() {
        let f = write_table(&[("a", Column::U32(vec![1, 2])), ("b", Column::Bool(vec![true, false]))]).unwrap();
        assert_eq!(&f[..4], b"PAR1");
        assert_eq!(&f[f.len() - 4..], b"PAR1");
        let meta = u32::from_le_bytes(f[f.len() - 8..f.len() - 4].try_into().unwrap()) as usize;
        assert!(meta < f.len() - 12);
        // Column a's page: its header, then 1 and 2 as 4-byte little-endian integers.
        let at = f.windows(8).position(|w| w == [1, 0, 0, 0, 2, 0, 0, 0]).unwrap();
        assert!(at > 4 && at < f.len() - 8 - meta);
    }

    /// Reads a page's data back (the plain and RLE/bit-packed layouts), as a column of `like`'s kind.
    fn decode(like: &Column, page: &[u8]) -> Column {
        let n = like.len();
        let le = |b: &[u8]| b.iter().rev().fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
        let present = |page: &[u8]| -> (Vec<bool>, usize) {
            let run = u32::from_le_bytes(page[..4].try_into().unwrap()) as usize;
            let header = varint_len(((n.div_ceil(8) as u64) << 1) | 1);
            let bits = (0..n).map(|i| page[4 + header + i / 8] >> (i % 8) & 1 == 1).collect();
            assert_eq!(page.len() - 4 - run, page.len() - 4 - header - n.div_ceil(8));
            (bits, 4 + run)
        };
        let opt = |w: usize| -> Vec<Option<u64>> {
            let (bits, mut at) = present(page);
            let mut out = Vec::with_capacity(n);
            for p in bits {
                out.push(p.then(|| le(&page[at..at + w])));
                at += if p { w } else { 0 };
            }
            assert_eq!(at, page.len(), "the page ends with its last value");
            out
        };
        match like {
            Column::Bool(_) => {
                assert_eq!(page.len(), n.div_ceil(8));
                Column::Bool((0..n).map(|i| page[i / 8] >> (i % 8) & 1 == 1).collect())
            }
            Column::U16(_) => Column::U16(page.chunks(4).map(|b| le(b) as u16).collect()),
            Column::U32(_) => Column::U32(page.chunks(4).map(|b| le(b) as u32).collect()),
            Column::U64(_) => Column::U64(page.chunks(8).map(le).collect()),
            Column::I64(_) => Column::I64(page.chunks(8).map(|b| le(b) as i64).collect()),
            Column::F64(_) => Column::F64(page.chunks(8).map(|b| f64::from_bits(le(b))).collect()),
            Column::OptBool(_) => {
                let (bits, at) = present(page);
                let mut k = 0;
                let v = bits
                    .into_iter()
                    .map(|p| {
                        p.then(|| {
                            k += 1;
                            page[at + (k - 1) / 8] >> ((k - 1) % 8) & 1 == 1
                        })
                    })
                    .collect();
                assert_eq!(page.len(), at + k.div_ceil(8), "the page ends with its last value");
                Column::OptBool(v)
            }
            Column::OptU32(_) => Column::OptU32(opt(4).into_iter().map(|x| x.map(|v| v as u32)).collect()),
            Column::OptU64(_) => Column::OptU64(opt(8)),
            Column::OptI64(_) => Column::OptI64(opt(8).into_iter().map(|x| x.map(|v| v as i64)).collect()),
            Column::OptF64(_) => Column::OptF64(opt(8).into_iter().map(|x| x.map(f64::from_bits)).collect()),
            Column::Str(_) => {
                let (bits, mut at) = present(page);
                let mut out = Vec::with_capacity(n);
                for p in bits {
                    out.push(p.then(|| {
                        let len = le(&page[at..at + 4]) as usize;
                        at += 4 + len;
                        String::from_utf8(page[at - len..at].to_vec()).unwrap()
                    }));
                }
                assert_eq!(at, page.len(), "the page ends with its last value");
                Column::Str(out)
            }
        }
    }

    #[test]
    fn pages_read_back_as_written() {
        let nulls = |n: usize| (0..n).map(|i| (i % 3 != 0).then_some(i as u64)).collect::<Vec<_>>();
        for n in [0, 1, 7, 8, 9, 1000, 70_000] {
            let cols = [
                Column::Bool((0..n).map(|i| i % 2 == 0).collect()),
                Column::U16((0..n).map(|i| i as u16).collect()),
                Column::U32((0..n).map(|i| i as u32).collect()),
                Column::U64((0..n as u64).collect()),
                Column::F64((0..n).map(|i| i as f64 / 3.0).collect()),
                Column::OptU32(nulls(n).into_iter().map(|x| x.map(|v| v as u32)).collect()),
                Column::OptU64(nulls(n)),
                Column::I64((0..n as i64).map(|i| i - 500).collect()),
                Column::OptI64(nulls(n).into_iter().map(|x| x.map(|v| -(v as i64))).collect()),
                Column::OptF64(nulls(n).into_iter().map(|x| x.map(|v| v as f64 * -0.5)).collect()),
                Column::OptBool(nulls(n).into_iter().map(|x| x.map(|v| v % 4 == 1)).collect()),
                Column::Str(nulls(n).into_iter().map(|x| x.map(|v| "é".repeat(v as usize % 5))).collect()),
            ];
            for c in cols {
                // Values written and values read back agree, so the length is what was written.
                let page = c.slice(0..n);
                let mut out = vec![0; page.page_len()];
                page.write_page_data(&mut out);
                assert_eq!(decode(&c, &out), c, "{n} values");
            }
        }
        assert_eq!([varint_len(1), varint_len(127), varint_len(128), varint_len(u64::MAX)], [1, 1, 2, 10]);
    }

    #[test]
    fn a_long_column_is_cut_into_pages_that_hold_it_in_order() {
        let cols = [
            ("a", Column::U64((0..8).collect())),
            ("b", Column::OptU32((0..8).map(|i| (i % 3 == 1).then_some(i)).collect())),
        ];
        let t = Table::with_page_rows(&cols, 3).unwrap();
        assert_eq!(
            t.pages.iter().map(|p| (p.column, p.rows.clone())).collect::<Vec<_>>(),
            [(0, 0..3), (0, 3..6), (0, 6..8), (1, 0..3), (1, 3..6), (1, 6..8)]
        );
        let mut file = vec![0; t.file_len()];
        t.write(&mut file);
        let mut at = 4;
        for p in &t.pages {
            at += p.header.len();
            let page = &file[at..at + p.len];
            at += p.len;
            let want = match &cols[p.column].1 {
                Column::U64(v) => Column::U64(v[p.rows.clone()].to_vec()),
                Column::OptU32(v) => Column::OptU32(v[p.rows.clone()].to_vec()),
                _ => unreachable!(),
            };
            assert_eq!(decode(&want, page), want);
        }
        assert_eq!(&file[at + t.footer.len() + 4..], b"PAR1");
    }

    fn every_kind(n: usize) -> Vec<(&'static str, Column)> {
        vec![
            ("b", Column::Bool((0..n).map(|i| i % 3 == 0).collect())),
            ("i", Column::I64((0..n as i64).map(|i| i * 7 - 3).collect())),
            ("s", Column::Str((0..n).map(|i| (i % 2 == 0).then(|| format!("x{i}"))).collect())),
            ("f", Column::OptF64((0..n).map(|i| (i % 5 != 0).then_some(i as f64)).collect())),
        ]
    }

    #[test]
    fn a_codec_that_keeps_the_bytes_writes_the_uncompressed_file_but_its_id() {
        for n in [0, 3, PAGE_ROWS + 5] {
            let cols = every_kind(n);
            let plain = write_table(&cols).unwrap();
            let mut seen = 0;
            let mut keep = |b: &[u8]| {
                seen += 1;
                Ok(b.to_vec())
            };
            let same = compressed(&cols, Codec { id: 0, compress: &mut keep }).unwrap();
            assert_eq!(same, plain, "{n} rows");
            assert_eq!(seen, if n == 0 { 0 } else { 4 * n.div_ceil(PAGE_ROWS) }, "one call per page");
        }
    }

    #[test]
    fn compressed_pages_carry_both_sizes_and_the_chunk_its_codec() {
        let cols = every_kind(10);
        let mut half = |b: &[u8]| Ok(b[..b.len() / 2].to_vec());
        let f = compressed(&cols, Codec { id: CODEC_ZSTD, compress: &mut half }).unwrap();
        let plain = write_table(&cols).unwrap();
        assert!(f.len() < plain.len());
        // The first page's header: type, then uncompressed and stored sizes (zigzag varints).
        let len = cols[0].1.slice(0..10).page_len();
        let mut want = Compact::default();
        want.i32(1, PAGE_DATA);
        want.i32(2, len as i32);
        want.i32(3, (len / 2) as i32);
        assert_eq!(&f[4..4 + want.buf.len()], &want.buf[..]);
        // The column chunks name ZSTD: codec is field 4, one after path_in_schema, so its header is
        // 0x15 (delta 1, i32) and its value zigzag(6) = 12. The string column's physical type
        // (BYTE_ARRAY = 6, field 1) reads alike, so count against the uncompressed file's footer.
        let footer = |f: &[u8]| {
            let len = u32::from_le_bytes(f[f.len() - 8..f.len() - 4].try_into().unwrap()) as usize;
            f[f.len() - 8 - len..f.len() - 8].to_vec()
        };
        let count = |m: Vec<u8>| m.windows(2).filter(|w| *w == [0x15, 12]).count();
        assert_eq!(count(footer(&f)), count(footer(&plain)) + cols.len());
    }

    #[test]
    fn ragged_or_duplicate_columns_are_refused() {
        let e = write_table(&[("a", Column::U64(vec![1])), ("b", Column::F64(vec![]))]).unwrap_err();
        assert_eq!(e, ParquetError::Ragged { name: "b".into(), len: 0, rows: 1 });
        let e = write_table(&[("a", Column::U64(vec![])), ("a", Column::F64(vec![]))]).unwrap_err();
        assert_eq!(e, ParquetError::Duplicate("a".into()));
        assert!(write_table(&[]).is_ok());
    }
}
