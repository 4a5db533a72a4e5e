"""Infrastructure every package uses: errors (UserError, the one-line failure), atomic (the one atomic
writer and file lock), settings (what each config field is: its role, whether a resume may change it,
its flag, its value before it existed), secrets (the one redaction of URIs and command lines) and
confined (file names read from a manifest or an index kept inside their folder).

The lowest layer: it imports nothing else of ours. It lies in pretrain/ because the top level (harness,
tasks, pretrain, reports) is the user's map and takes no new package; tests/test_imports.py gives every
module under foundation/infra/ this layer by its location.
"""
