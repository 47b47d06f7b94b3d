package main

// Placeholders for the one-shot commands, replaced as they land.

var (
	cmdRun    = notYet("run")
	cmdImage  = notYet("image")
	cmdModel  = notYet("model")
	cmdReplay = notYet("replay")
)
