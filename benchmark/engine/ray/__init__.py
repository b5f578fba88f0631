"""The distributed executor on Ray actors (`--executor ray`). Ray is imported only here."""
