//! In-network schemes as simulator hooks: adapters that host the sans-IO state machines of
//! `leoguard-proto` on nodes (see `Agent::on_arrive` / `on_depart`).

/// Declares a struct of `u64` counters with one list of fields: `+=` sums the fields before the `;`
/// and keeps the largest of those after it, and `fields()` gives every counter with its name (the
/// results tables and the Python dicts read it, so a new counter cannot be left out anywhere).
macro_rules! counters {
    (
        $(#[$m:meta])* pub struct $name:ident {
            $($(#[$fm:meta])* $f:ident,)*
            ; $($(#[$gm:meta])* $g:ident,)*
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fm])* pub $f: u64,)*
            $($(#[$gm])* pub $g: u64,)*
        }

        impl std::ops::AddAssign for $name {
            fn add_assign(&mut self, o: $name) {
                $(self.$f += o.$f;)*
                $(self.$g = self.$g.max(o.$g);)*
            }
        }

        impl $name {
            /// Every counter with its name, in declaration order.
            pub fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($f), self.$f),)* $((stringify!($g), self.$g),)*]
            }
        }
    };
}

pub mod linkguardian;
pub mod satguard;
