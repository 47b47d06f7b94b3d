package main

// Placeholders for the sandbox commands; the sandbox work replaces this file.
