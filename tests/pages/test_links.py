"""Links to workflows (pages/links.py): the one-reverse form for many workflows of a page gives the
links the per-workflow form gives."""

from __future__ import annotations

from pages.links import workflow_url, workflow_urls


def test_links_made_from_one_reverse_are_the_links_reversed_one_by_one():
    # given: plain ids, an id with characters a URL quotes, the viewer's own and another owner's
    cases = [("train-1", "alice"), ("train-1", "bob"), ("a.b_c~d-2", "carol x"), ("odd id é?1", "bob")]

    # when
    url_of = workflow_urls(viewer="alice")
    cancel_of = workflow_urls(viewer="alice", view="workflow-cancel")

    # then
    assert [url_of(workflow_id, owner) for workflow_id, owner in cases] == [
        workflow_url(workflow_id, owner, viewer="alice") for workflow_id, owner in cases]
    assert [cancel_of(workflow_id, owner) for workflow_id, owner in cases] == [
        workflow_url(workflow_id, owner, viewer="alice", view="workflow-cancel") for workflow_id, owner in cases]
    assert url_of("train-1", "bob") == "/workflows/train-1/?user=bob"
    assert url_of("odd id é?1", "alice") == "/workflows/odd%20id%20%C3%A9%3F1/"
