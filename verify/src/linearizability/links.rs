//! A doubly linked list over `0..n` whose removals are undone in reverse order ("dancing
//! links"): the search lifts placed operations out and puts them back when it backtracks,
//! so walking the unplaced operations costs only as many steps as there are of them.

/// The list; index `n` is the sentinel before the first and after the last element.
#[derive(Debug)]
pub(super) struct Links {
    next: Vec<usize>,
    prev: Vec<usize>,
}

impl Links {
    /// A list holding `order`, in that order (each index below `n` at most once).
    pub(super) fn new(n: usize, order: impl IntoIterator<Item = usize>) -> Self {
        let mut links = Self {
            next: vec![n; n + 1],
            prev: vec![n; n + 1],
        };
        let mut last = n;
        for i in order {
            links.next[last] = i;
            links.prev[i] = last;
            last = i;
        }
        links.next[last] = n;
        links.prev[n] = last;
        links
    }

    fn sentinel(&self) -> usize {
        self.next.len() - 1
    }

    /// The first element, if any.
    pub(super) fn first(&self) -> Option<usize> {
        let head = self.next[self.sentinel()];
        (head != self.sentinel()).then_some(head)
    }

    /// The elements in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let end = self.sentinel();
        std::iter::successors(self.first(), move |&i| {
            Some(self.next[i]).filter(|&n| n != end)
        })
    }

    /// Unlinks `i`, which must be in the list.
    pub(super) fn remove(&mut self, i: usize) {
        let (p, n) = (self.prev[i], self.next[i]);
        self.next[p] = n;
        self.prev[n] = p;
    }

    /// Relinks `i` where it was; removals must be undone last-removed first.
    pub(super) fn restore(&mut self, i: usize) {
        let (p, n) = (self.prev[i], self.next[i]);
        self.next[p] = i;
        self.prev[n] = i;
    }
}

#[cfg(test)]
mod tests {
    use super::Links;

    #[test]
    fn removals_undone_in_reverse_restore_the_order() {
        let mut l = Links::new(5, [0, 2, 4, 1]);
        assert_eq!(l.iter().collect::<Vec<_>>(), [0, 2, 4, 1]);
        l.remove(2);
        l.remove(0);
        l.remove(1);
        assert_eq!(l.iter().collect::<Vec<_>>(), [4]);
        l.restore(1);
        l.restore(0);
        assert_eq!(l.first(), Some(0));
        l.restore(2);
        assert_eq!(l.iter().collect::<Vec<_>>(), [0, 2, 4, 1]);
        l.remove(0);
        l.remove(2);
        l.remove(4);
        l.remove(1);
        assert_eq!(l.first(), None);
    }
}
