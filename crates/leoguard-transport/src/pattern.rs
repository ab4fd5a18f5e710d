//! The bytes the sender puts in its payloads: a function of the stream offset alone, so the receiver
//! checks every byte it is handed without a copy of the stream (and a segment delivered at the wrong
//! offset, or corrupted on the way, is caught). Byte at offset `o` = `(o mod 251) xor (o div 251)`,
//! whose period is 251 x 256 bytes.

const P: u64 = 251;

/// Fills `buf` with the stream bytes starting at offset `seq`.
pub fn fill(seq: u64, buf: &mut [u8]) {
    let (mut k, mut blk) = ((seq % P) as u8, (seq / P) as u8);
    for b in buf {
        *b = k ^ blk;
        k += 1;
        if u64::from(k) == P {
            k = 0;
            blk = blk.wrapping_add(1);
        }
    }
}

/// Whether `buf` holds the stream bytes starting at offset `seq`.
pub fn check(seq: u64, buf: &[u8]) -> bool {
    let (mut k, mut blk) = ((seq % P) as u8, (seq / P) as u8);
    let mut bad = 0u8;
    for &b in buf {
        bad |= b ^ (k ^ blk);
        k += 1;
        if u64::from(k) == P {
            k = 0;
            blk = blk.wrapping_add(1);
        }
    }
    bad == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_is_a_function_of_the_offset() {
        let mut whole = vec![0u8; 70_000];
        fill(0, &mut whole);
        for (seq, len) in [(0u64, 10usize), (250, 3), (251, 1), (64_255, 600), (1_000, 1448)] {
            let mut part = vec![0u8; len];
            fill(seq, &mut part);
            assert_eq!(part[..], whole[seq as usize..seq as usize + len]);
            assert!(check(seq, &part));
            assert!(!check(seq + 1, &part));
            part[len / 2] ^= 0x10;
            assert!(!check(seq, &part));
        }
        // Not periodic below 251 x 256 bytes.
        assert_ne!(whole[..1448], whole[251..251 + 1448]);
    }
}
