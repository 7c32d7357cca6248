"""Act: carrying out a plan (`execute`) and recording it (`record`, `recorder`)."""
