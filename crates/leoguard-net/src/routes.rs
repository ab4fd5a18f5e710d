//! Next-hop tables, as both engines keep them: one column per destination, allocated when the first
//! route towards it is set (a 1584-satellite constellation pays memory only for the destinations its
//! flows use).

use crate::link::{LinkId, NodeId};

/// Every node's next hop towards every destination.
#[derive(Clone, Debug, Default)]
pub struct NextHops {
    nodes: usize,
    /// columns[dst][at] = link.
    columns: Vec<Vec<Option<LinkId>>>,
}

impl NextHops {
    /// An empty table for `nodes` nodes.
    pub fn new(nodes: usize) -> Self {
        NextHops { nodes, columns: vec![Vec::new(); nodes] }
    }

    /// Sets (or with `None` removes) `at`'s next hop towards `dst`.
    pub fn set(&mut self, at: NodeId, dst: NodeId, via: Option<LinkId>) {
        let column = &mut self.columns[dst.0 as usize];
        if column.is_empty() {
            if via.is_none() {
                return;
            }
            column.resize(self.nodes, None);
        }
        column[at.0 as usize] = via;
    }

    /// The next hop of `at` towards `dst`.
    #[inline]
    pub fn get(&self, at: NodeId, dst: NodeId) -> Option<LinkId> {
        self.columns.get(dst.0 as usize).and_then(|c| c.get(at.0 as usize).copied().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_appear_on_first_use_and_routes_can_be_removed() {
        let mut t = NextHops::new(4);
        t.set(NodeId(0), NodeId(3), None);
        assert_eq!(t.get(NodeId(0), NodeId(3)), None);
        t.set(NodeId(0), NodeId(3), Some(LinkId(7)));
        assert_eq!(t.get(NodeId(0), NodeId(3)), Some(LinkId(7)));
        assert_eq!(t.get(NodeId(1), NodeId(3)), None);
        t.set(NodeId(0), NodeId(3), None);
        assert_eq!(t.get(NodeId(0), NodeId(3)), None);
        assert_eq!(t.get(NodeId(0), NodeId(9)), None, "an unknown destination has no route");
    }
}
