"""Bug: encoding merges from a heap of (rank, node) entries whose ties (the same pair at several places
in a word, as in "aaaa") go to the node with the smallest id(): object addresses, not positions, so
the leftmost occurrence does not always win, and the result varies from run to run."""

import heapq

import reference
from reference import *  # noqa: F403


class _Node:
    __slots__ = ("token", "prev", "next", "alive")

    def __init__(self, token):
        self.token, self.prev, self.next, self.alive = token, None, None, True

    def __lt__(self, other):
        return id(self) < id(other)


class Tokenizer(reference.Tokenizer):
    def bpe(self, word):
        nodes = [_Node(bytes([b])) for b in word]
        for left, right in zip(nodes, nodes[1:]):
            left.next, right.prev = right, left
        heap = []

        def push(node):
            if node.next is not None and (node.token, node.next.token) in self.ranks:
                heapq.heappush(heap, (self.ranks[(node.token, node.next.token)], node, node.next.token))

        for node in nodes:
            push(node)
        while heap:
            _, node, right_token = heapq.heappop(heap)
            right = node.next
            if not node.alive or right is None or right.token != right_token:
                continue
            node.token += right.token
            right.alive = False
            node.next = right.next
            if right.next is not None:
                right.next.prev = node
            push(node)
            if node.prev is not None:
                push(node.prev)
        out, node = [], nodes[0] if nodes else None
        while node is not None:
            out.append(self.ids[node.token])
            node = node.next
        return out


def get_tokenizer(vocab, merges, special_tokens=None):
    return Tokenizer(dict(vocab), list(merges), special_tokens)
