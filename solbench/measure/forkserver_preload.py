"""Imported by the fork server workers are forked from (``set_forkserver_preload``), and only there:
the server itself becomes undumpable before it imports torch (:mod:`solbench.measure.nodump`), so a
worker cannot attach to it and change what later workers start from. Never import it elsewhere:
it would make the importing process undumpable."""

from solbench.measure.nodump import forbid_attach

forbid_attach()
