"""The write pipeline: decode, default, patch/apply, validate, admit, store (`writes`), with
object metadata, managed fields, deletion rules, and the per-server state it runs against."""
