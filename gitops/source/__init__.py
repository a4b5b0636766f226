"""The GitOps source: a repository's bytes, from git to checked manifests.

It owns git itself (`git`, `clones`, `process`, `messages`: one sandboxed, time-bounded git
process at a time per clone, a size-capped clone cache on disk, `diskcache`, `tree`; an anonymous
HTTP remote's refs read in-process, `advertisement`), reading a
commit's manifests (`reading`: blob by blob where it can, `incremental`, or from a checkout,
`checkout`), manifest files for `trainops check` (`files`), and push payloads from Git hosts
(`pushhooks`). What the bytes mean is the engine's to decide.
"""
